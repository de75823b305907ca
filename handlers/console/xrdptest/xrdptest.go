// Package xrdptest starts a real xrdp (Debian's package) on a loopback
// port for the tests of the RDP console: the proxy's Go tests and the
// browser test, where IronRDP's web client reaches its login screen
// through the proxy.
//
// xrdp is run by hand, in the foreground (-n) with a configuration of the
// test's own (-c): Debian's package does not start it, and the machine's
// /etc/xrdp/xrdp.ini is left alone. No xrdp-sesman is started: the tests
// go as far as xrdp's login screen, which xrdp draws itself.
package xrdptest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/qemu/qemutest"
)

// Server is a running xrdp.
type Server struct {
	Addr string // "127.0.0.1:PORT"
	// Cert is the DER of xrdp's TLS certificate, made by Start.
	Cert []byte
	// Log is the path of xrdp's log file.
	Log string
}

// Start starts xrdp for the test and stops it at the test's end. Without
// xrdp it calls qemutest.RequireEngine (a skip, or a failure under
// CORRAL_REQUIRE_ENGINES=1).
func Start(t testing.TB) *Server {
	t.Helper()
	return StartLayout(t, Aligned)
}

// StartLayout is Start with the login screen drawn in the given layout.
func StartLayout(t testing.TB, layout Layout) *Server {
	t.Helper()
	bin, err := exec.LookPath("xrdp")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/xrdp"); serr != nil {
			qemutest.RequireEngine(t, "xrdp is not installed (Debian: xrdp; hack/install-deps.sh)")
		}
		bin = "/usr/sbin/xrdp"
	}
	dir := t.TempDir()
	certDER, err := writeCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The port is picked free and handed to xrdp, which may lose it to
	// another process in between: try a few.
	var lastErr error
	for range 3 {
		s, err := start(t, bin, dir, layout)
		if err == nil {
			s.Cert = certDER
			return s
		}
		lastErr = err
	}
	t.Fatalf("xrdptest: xrdp did not start: %v", lastErr)
	return nil
}

func start(t testing.TB, bin, dir string, layout Layout) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Log: filepath.Join(dir, "xrdp.log")}
	ini := filepath.Join(dir, "xrdp.ini")
	if err := os.WriteFile(ini, []byte(config(dir, port, s.Log, layout)), 0o600); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, "-n", "-c", ini)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("xrdptest: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	// Ready when xrdp answers an RDP Connection Request.
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := backends.ProbeRDP(ctx, s.Addr, func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", s.Addr)
		})
		cancel()
		if err == nil {
			break
		}
		select {
		case werr := <-exited:
			exited <- werr
			stop()
			log, _ := os.ReadFile(s.Log)
			return nil, fmt.Errorf("xrdp exited (%v): %s\n%s", werr, out.String(), log)
		default:
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("xrdp did not answer on %s: %v", s.Addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			log, _ := os.ReadFile(s.Log)
			t.Logf("xrdp log:\n%s", log)
		}
	})
	return s, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// writeCert writes a self-signed RSA certificate and its key as
// cert.pem and key.pem in dir and returns the certificate's DER.
func writeCert(dir string) ([]byte, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "corral-xrdp-test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(filepath.Join(dir, "cert.pem"), certPEM, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "key.pem"), keyPEM, 0o600); err != nil {
		return nil, err
	}
	return der, nil
}
