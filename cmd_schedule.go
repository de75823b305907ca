package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/corral-dev/corral/app"
	"github.com/corral-dev/corral/app/schedule"
	"github.com/corral-dev/corral/app/tasks"
)

const scheduleUsage = `usage:
  corral schedule tick [serve flags]       evaluate the schedules once and run what is due (for a systemd timer)
  corral schedule list
  corral schedule add (--ref REF | --folder PATH) (--power start|stop|shutdown | --snapshot --keep N)
                      --cron "MIN HOUR DOM MON DOW" [--tz ZONE] [--in-cluster] [--disabled]
  corral schedule rm ID
  corral schedule enable|disable ID`

// scheduleCmd manages and ticks the schedules in the database `corral
// serve` uses, with the contexts it would build. It calls the schedule
// use case, as the REST API and the dashboard do.
func scheduleCmd(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New(scheduleUsage)
	}
	var serveArgs []string
	if args[0] == "tick" {
		serveArgs = args[1:]
	}
	cfg, err := app.ParseServe(serveArgs, os.Getenv)
	if err != nil {
		return err
	}
	if args[0] != "tick" {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	a, err := app.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer a.Close()
	o := tasks.Origin{Actor: cliActor(), Surface: "cli"}
	switch args[0] {
	case "tick":
		a.Fleet.Refresh(ctx) // the tick resolves and skips against the fleet's snapshot
		fired, err := a.Schedules.Tick(ctx, time.Now())
		if err != nil {
			return err
		}
		failed := 0
		for _, f := range fired {
			fmt.Fprintf(out, "%d\t%s\t%s\t%s\t%s\n", f.ID, f.Target, f.Due.Format("2006-01-02 15:04 MST"), f.Result, f.Message)
			if f.Result == schedule.ResultFailed {
				failed++
			}
		}
		if failed > 0 {
			return fmt.Errorf("%d schedules failed", failed)
		}
		return nil
	case "list":
		list, err := a.Schedules.List(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tTARGET\tWHAT\tCRON\tZONE\tENABLED\tNEXT\tLAST")
		for _, s := range list {
			what := s.Action
			if s.Kind == schedule.KindSnapshot {
				what = "snapshot keep " + strconv.Itoa(s.Keep)
			}
			if s.InCluster {
				what += " (in-cluster)"
			}
			next := "-"
			if !s.Next.IsZero() {
				next = s.Next.Format("2006-01-02 15:04 MST")
			}
			last := "-"
			if s.LastResult != "" {
				last = s.LastResult + ": " + s.LastMessage
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%t\t%s\t%s\n", s.ID, schedule.Target(s.Schedule), what, s.Cron, s.TZ, s.Enabled, next, last)
		}
		return tw.Flush()
	case "add":
		req, err := parseScheduleAdd(args[1:])
		if err != nil {
			return err
		}
		a.Fleet.Refresh(ctx) // a bare name resolves against the fleet
		_, sc, err := a.Schedules.Create(ctx, o, req)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "added schedule %d\n", sc.ID)
		return nil
	case "rm", "enable", "disable":
		if len(args) != 2 {
			return errors.New(scheduleUsage)
		}
		id, err := strconv.ParseInt(args[1], 10, 64)
		if err != nil {
			return fmt.Errorf("schedule id %q: a number from corral schedule list is accepted", args[1])
		}
		if args[0] == "rm" {
			_, err = a.Schedules.Delete(ctx, o, id)
		} else {
			_, err = a.Schedules.SetEnabled(ctx, o, id, args[0] == "enable")
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "schedule %d %s\n", id, map[string]string{"rm": "deleted", "enable": "enabled", "disable": "disabled"}[args[0]])
		return nil
	}
	return errors.New(scheduleUsage)
}

// parseScheduleAdd parses the flags of `corral schedule add`.
func parseScheduleAdd(args []string) (schedule.Request, error) {
	var req schedule.Request
	var snapshot bool
	fs := flag.NewFlagSet("corral schedule add", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&req.Ref, "ref", "", "instance `REF` (canonical, or an unambiguous name)")
	fs.StringVar(&req.Folder, "folder", "", "folder `PATH`")
	fs.StringVar(&req.Action, "power", "", "power `ACTION`: start, stop or shutdown")
	fs.BoolVar(&snapshot, "snapshot", false, "take auto- snapshots")
	fs.IntVar(&req.Keep, "keep", 0, "auto- snapshots to keep")
	fs.StringVar(&req.Cron, "cron", "", "cron `EXPRESSION` of 5 fields")
	fs.StringVar(&req.TZ, "tz", "UTC", "IANA time `ZONE`")
	fs.BoolVar(&req.InCluster, "in-cluster", false, "a KubeVirt CronJob instead of the local tick")
	fs.BoolVar(&req.Disabled, "disabled", false, "create it disabled")
	if err := fs.Parse(args); err != nil {
		return req, fmt.Errorf("%v\n%s", err, scheduleUsage)
	}
	if fs.NArg() > 0 {
		return req, fmt.Errorf("unexpected arguments %q\n%s", fs.Args(), scheduleUsage)
	}
	req.Kind = schedule.KindPower
	if snapshot {
		req.Kind = schedule.KindSnapshot
	}
	return req, nil
}
