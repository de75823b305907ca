package vdi

// Subscribe returns a channel that receives a value after claims, their
// sessions or the pools change (a claim, a release, a reclaim, a console
// that opened or closed, a pool made or deleted), and the function that
// ends the subscription. Notifications coalesce (app/broadcast): the
// desktops page re-reads what it shows.
func (s *Service) Subscribe() (<-chan struct{}, func()) { return s.hub.Subscribe() }

// changed tells the subscribers that something they show changed.
func (s *Service) changed() { s.hub.Notify() }
