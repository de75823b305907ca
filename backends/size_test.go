package backends

import (
	"errors"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want Size
	}{
		{"512", 512 << 20},
		{"4G", 4_000_000_000},
		{"4M", 4_000_000},
		{"6Gi", 6 << 30},
		{"6GiB", 6 << 30},
		{"512Mi", 512 << 20},
		{"512MiB", 512 << 20},
		{"1.5Gi", 3 << 29},
		{"2T", 2e12},
		{" 20Gi ", 20 << 30},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if err != nil {
			t.Errorf("ParseSize(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseSize(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestParseSizeRefuses(t *testing.T) {
	for _, in := range []string{"", "G", "0", "-1G", "1e3", "4 gigs", "4GB", "4g", "1..2G", "0.0000001M", "2000Ti", "0x10", "+4G", "NaN"} {
		_, err := ParseSize(in)
		if err == nil {
			t.Errorf("ParseSize(%q) succeeded, want an error", in)
			continue
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseSize(%q): %v is not ErrInvalid", in, err)
		}
		if msg := SafeMessage(err); !strings.Contains(msg, in) {
			t.Errorf("ParseSize(%q) message %q does not name the input", in, msg)
		}
	}
}

func TestFormatMiB(t *testing.T) {
	tests := map[int64]string{6144: "6Gi", 512: "512Mi", 1536: "1536Mi", 1 << 20: "1Ti", 0: "0"}
	for mib, want := range tests {
		if got := FormatMiB(mib, 0); got != want {
			t.Errorf("FormatMiB(%d) = %q, want %q", mib, got, want)
		}
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"512", "4G", "1.5Gi", "6GiB", "x", "0.1M"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ParseSize(%q) error %v is not ErrInvalid", s, err)
			}
			return
		}
		if n <= 0 || n > maxSize {
			t.Fatalf("ParseSize(%q) = %d, out of range", s, n)
		}
		// The formatted form parses back to the same size.
		back, err := ParseSize(n.String())
		if err != nil && n%MiB == 0 {
			t.Fatalf("ParseSize(%q) = %d formats as %q, which does not parse: %v", s, n, n.String(), err)
		}
		if err == nil && n%MiB == 0 && back != n {
			t.Fatalf("round trip of %d via %q gave %d", n, n.String(), back)
		}
	})
}
