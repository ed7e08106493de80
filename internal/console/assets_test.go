package console

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/bolide-mq/bolide/client"
)

func serveAsset(t *testing.T, h http.Handler, path string, hdr map[string]string) *http.Response {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Result()
}

// The app's files: index.html for /console/, no-cache with an ETag (304
// when it matches), gzip when accepted; / redirects to /console/.
func TestConsoleAssets(t *testing.T) {
	con, err := New(Options{Daemon: NameServer, Addr: "127.0.0.1:9876", NameServers: []string{"127.0.0.1:9876"}, Assets: testAssets}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()
	if r := serveAsset(t, con, "/", nil); r.StatusCode != http.StatusFound || r.Header.Get("Location") != "/console/" {
		t.Fatalf("/: %d %q", r.StatusCode, r.Header.Get("Location"))
	}
	r := serveAsset(t, con, "/console/", nil)
	body, _ := io.ReadAll(r.Body)
	etag := r.Header.Get("ETag")
	if r.StatusCode != 200 || !bytes.Equal(body, testAssets["index.html"].Data) || etag == "" ||
		r.Header.Get("Cache-Control") != "no-cache" || r.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("index: %d %v %q", r.StatusCode, r.Header, body)
	}
	if r := serveAsset(t, con, "/console/index.html", map[string]string{"If-None-Match": etag}); r.StatusCode != http.StatusNotModified {
		t.Fatalf("If-None-Match: %d", r.StatusCode)
	}
	r = serveAsset(t, con, "/console/app.js", map[string]string{"Accept-Encoding": "br, gzip"})
	if r.Header.Get("Content-Encoding") != "gzip" || r.Header.Get("Vary") != "Accept-Encoding" {
		t.Fatalf("app.js: %v", r.Header)
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(zr)
	if !bytes.Equal(plain, testAssets["app.js"].Data) {
		t.Fatal("gzip body differs from app.js")
	}
	r = serveAsset(t, con, "/console/app.js", map[string]string{"Accept-Encoding": "gzip;q=0"})
	if r.Header.Get("Content-Encoding") != "" {
		t.Fatalf("gzip;q=0 got %q", r.Header.Get("Content-Encoding"))
	}
	for _, p := range []string{"/console/missing.js", "/console/../go.mod", "/elsewhere"} {
		if r := serveAsset(t, con, p, nil); r.StatusCode != 404 {
			t.Errorf("%s: %d", p, r.StatusCode)
		}
	}
	// Nothing dialled: no SDK client was made for the pages.
	if n := con.clients.len(); n != 0 {
		t.Fatalf("%d SDK clients after serving pages", n)
	}
	if _, err := New(Options{Daemon: "proxy"}, nil); err == nil {
		t.Fatal("an unknown daemon kind accepted")
	}
}

// The SDK clients: one per user, the least recently used closed past the
// bound once no request holds it, all closed by close.
func TestClientsLRU(t *testing.T) {
	var made []*client.Admin
	cs := newClients(2, func(user) (*client.Admin, error) {
		a, err := client.NewAdmin(client.WithNameServers("127.0.0.1:1"))
		made = append(made, a)
		return a, err
	})
	a1, _ := cs.acquire(user{"a", "1"})
	b, _ := cs.acquire(user{"b", "1"})
	cs.release(b)
	again, _ := cs.acquire(user{"a", "1"})
	if again != a1 || len(made) != 2 {
		t.Fatalf("a's client made again (%d made)", len(made))
	}
	cs.release(again)
	c, _ := cs.acquire(user{"c", "1"}) // drops b, the least recently used
	cs.release(c)
	if _, err := made[1].ClusterInfo(t.Context()); !errors.Is(err, client.ErrClosed) || cs.len() != 2 {
		t.Fatalf("b's client not closed: %v (%d kept)", err, cs.len())
	}
	// A new secret is another client.
	a2, _ := cs.acquire(user{"a", "2"}) // drops a (still held by a1)
	if a2 == a1 || a1.dropped != true {
		t.Fatal("a new secret reused the old client")
	}
	if _, err := a1.admin.ClusterInfo(t.Context()); errors.Is(err, client.ErrClosed) {
		t.Fatal("a client in use was closed")
	}
	cs.release(a1)
	if _, err := a1.admin.ClusterInfo(t.Context()); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("a dropped client still open after its last release: %v", err)
	}
	cs.release(a2)
	if err := cs.close(); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.acquire(user{}); err != errClosed {
		t.Fatalf("acquire after close: %v", err)
	}
}
