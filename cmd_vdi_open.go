package main

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/corral-dev/corral/app/vdi"
)

// openCommand returns the command line `corral vdi connect --open`
// starts for the connect answer c (docs/vdi.md, Open a client):
//
//   - with base (--url): the browser on the target's console page:
//     $BROWSER (its first entry; %s is replaced by the URL, else the URL
//     is the last argument), else xdg-open (open on macOS);
//   - without it, for an RDP target with an address this machine
//     reaches (qemu's forward): xfreerdp /v:HOST:PORT;
//   - anything else is an error that says to give --url.
//
// manual is what to open by hand when the program is missing: the URL
// for a browser, HOST:PORT for xfreerdp. It is pure: getenv and goos are
// the environment's, passed in.
func openCommand(c vdi.ConnectAnswer, base string, getenv func(string) string, goos string) (argv []string, manual string, err error) {
	if base != "" {
		u := strings.TrimSuffix(base, "/") + c.Target.URL
		if b, _, _ := strings.Cut(getenv("BROWSER"), ":"); strings.TrimSpace(b) != "" {
			argv := strings.Fields(b)
			for i, a := range argv {
				if strings.Contains(a, "%s") {
					argv[i] = strings.ReplaceAll(a, "%s", u)
					return argv, u, nil
				}
			}
			return append(argv, u), u, nil
		}
		if goos == "darwin" {
			return []string{"open", u}, u, nil
		}
		return []string{"xdg-open", u}, u, nil
	}
	if c.Target.Protocol == vdi.ProtoRDP && c.Target.Address != "" {
		return []string{"xfreerdp", "/v:" + c.Target.Address}, c.Target.Address, nil
	}
	if c.Target.Protocol == vdi.ProtoRDP {
		return nil, "", errors.New("vdi connect --open: the RDP console of " + c.Desktop + " has no address this machine reaches; give --url BASE to open it in the browser")
	}
	return nil, "", fmt.Errorf("vdi connect --open: without --url only an RDP target opens a native client (xfreerdp), and %s offers %s; give --url BASE (the server's address) to open its console page in the browser",
		c.Desktop, strings.ToUpper(c.Target.Protocol))
}

// installHint names what provides a launcher's program.
var installHint = map[string]string{
	"xdg-open": "install xdg-utils, set $BROWSER",
	"xfreerdp": "install FreeRDP (Debian: freerdp2-x11)",
	"open":     "set $BROWSER",
}

// launch starts argv and leaves it running (a browser or an RDP client
// outlives the command). A program that is not installed is an error
// that names what to install, or to open manual (openCommand's) by hand.
func launch(argv []string, manual string) error {
	if _, err := exec.LookPath(argv[0]); err != nil {
		hint := installHint[argv[0]]
		if hint == "" {
			hint = "check $BROWSER"
		}
		return fmt.Errorf("vdi connect --open: %s is not installed or not in PATH: %s, or open %s yourself", argv[0], hint, manual)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("vdi connect --open: start %s: %w", argv[0], err)
	}
	return cmd.Process.Release()
}
