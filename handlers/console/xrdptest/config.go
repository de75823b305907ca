package xrdptest

import (
	"fmt"
	"path/filepath"
)

// Layout is the geometry of xrdp's login screen: the ls_* keys of
// xrdp.ini that place the dialog and its widgets (x positions and widths
// in pixels; heights and y positions do not matter here).
//
// Their widths matter to IronRDP's web client (0.7.0): xrdp sends every
// region it repaints as a bitmap whose width it pads to a multiple of 4
// pixels while the destination rectangle keeps the region's real width,
// and IronRDP copies the decoded bitmap with the rectangle's width as its
// row stride, so a region whose width is not a multiple of 4 comes out
// sheared by the padding, 1 to 3 pixels per row. docs/consoles.md.
type Layout struct {
	Name string
	// Width is the dialog's width (ls_width).
	Width int
	// LogoX, LabelX, LabelWidth, InputX, InputWidth: ls_logo_x_pos,
	// ls_label_x_pos, ls_label_width, ls_input_x_pos, ls_input_width.
	LogoX, LabelX, LabelWidth, InputX, InputWidth int
	// OKX, OKWidth, CancelX, CancelWidth: the buttons' x positions and
	// widths (ls_btn_ok_x_pos, ls_btn_ok_width, ls_btn_cancel_*).
	OKX, OKWidth, CancelX, CancelWidth int
}

// Debian is the layout of Debian's /etc/xrdp/xrdp.ini (xrdp 0.9.21):
// the dialog is 350 pixels wide, the inputs 210 and the buttons 85, so
// IronRDP 0.7.0 shears them.
var Debian = Layout{
	Name: "debian", Width: 350,
	LogoX: 55, LabelX: 30, LabelWidth: 65, InputX: 110, InputWidth: 210,
	OKX: 142, OKWidth: 85, CancelX: 237, CancelWidth: 85,
}

// Aligned is Debian's layout moved onto a 4-pixel grid (every x and
// width a multiple of 4, none off by more than 3 pixels): the layout an
// xrdp needs for IronRDP 0.7.0 to draw its login screen straight.
var Aligned = Layout{
	Name: "aligned", Width: 352,
	LogoX: 56, LabelX: 32, LabelWidth: 64, InputX: 112, InputWidth: 212,
	OKX: 144, OKWidth: 84, CancelX: 240, CancelWidth: 84,
}

// config is xrdp.ini: TLS only (security_layer=tls, as the web client
// needs), on 127.0.0.1:port, one process (fork=false, so stopping it
// stops every connection), virtual channels off, and the login screen in
// the given layout.
func config(dir string, port int, logFile string, l Layout) string {
	return fmt.Sprintf(`[Globals]
ini_version=1
fork=false
port=tcp://127.0.0.1:%d
tcp_nodelay=true
security_layer=tls
crypt_level=high
certificate=%s
key_file=%s
ssl_protocols=TLSv1.2, TLSv1.3
max_bpp=32
new_cursors=true
use_fastpath=both
bitmap_cache=true
bitmap_compression=true
bulk_compression=true
blue=009cb5
grey=dedede
ls_top_window_bg_color=009cb5
ls_width=%d
ls_height=430
ls_bg_color=dedede
ls_logo_filename=
ls_logo_x_pos=%d
ls_logo_y_pos=50
ls_label_x_pos=%d
ls_label_width=%d
ls_input_x_pos=%d
ls_input_width=%d
ls_input_y_pos=220
ls_btn_ok_x_pos=%d
ls_btn_ok_y_pos=370
ls_btn_ok_width=%d
ls_btn_ok_height=30
ls_btn_cancel_x_pos=%d
ls_btn_cancel_y_pos=370
ls_btn_cancel_width=%d
ls_btn_cancel_height=30

[Logging]
LogFile=%s
LogLevel=INFO
EnableSyslog=false

[Channels]
rdpdr=false
rdpsnd=false
drdynvc=false
cliprdr=false
rail=false
xrdpvr=false
tcutils=false

[Xorg]
name=Xorg
lib=libxup.so
username=ask
password=ask
ip=127.0.0.1
port=-1
code=20
`, port, filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"),
		l.Width, l.LogoX, l.LabelX, l.LabelWidth, l.InputX, l.InputWidth,
		l.OKX, l.OKWidth, l.CancelX, l.CancelWidth, logFile)
}
