package app

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseVDI(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want VDIConfig
		err  string
	}{
		{"defaults", nil, VDIConfig{Grace: 15 * time.Minute}, ""},
		{"on", map[string]string{"CORRAL_VDI_BROKER": "1", "CORRAL_VDI_DISCONNECT_GRACE": "0", "CORRAL_VDI_MAX_SESSION": "8h"},
			VDIConfig{Broker: true, Grace: 0, MaxSession: 8 * time.Hour}, ""},
		{"bad broker", map[string]string{"CORRAL_VDI_BROKER": "yes"}, VDIConfig{}, "CORRAL_VDI_BROKER"},
		{"bad grace", map[string]string{"CORRAL_VDI_DISCONNECT_GRACE": "15"}, VDIConfig{}, "CORRAL_VDI_DISCONNECT_GRACE"},
		{"negative", map[string]string{"CORRAL_VDI_MAX_SESSION": "-1h"}, VDIConfig{}, "CORRAL_VDI_MAX_SESSION"},
		{"namespaces", map[string]string{"CORRAL_VDI_NAMESPACES": " desktops, -,lab-2,desktops"},
			VDIConfig{Grace: 15 * time.Minute, Namespaces: []string{"desktops", "-", "lab-2"}}, ""},
		{"namespace not a label", map[string]string{"CORRAL_VDI_NAMESPACES": "desktops,Lab_2"}, VDIConfig{}, `"Lab_2" is not a namespace: accepted are DNS-1123 labels`},
		{"namespace too long", map[string]string{"CORRAL_VDI_NAMESPACES": strings.Repeat("a", 64)}, VDIConfig{}, "CORRAL_VDI_NAMESPACES"},
		{"empty namespace", map[string]string{"CORRAL_VDI_NAMESPACES": "desktops,,lab"}, VDIConfig{}, "an empty name; accepted are comma-separated namespaces"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseServe(nil, func(k string) string { return tc.env[k] })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one naming %s", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(cfg.VDI, tc.want) {
				t.Fatalf("VDI = %+v, %v; want %+v", cfg.VDI, err, tc.want)
			}
		})
	}
}
