package readahead

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"
)

// chunky returns at most max bytes a read, a random amount each time.
type chunky struct {
	src []byte
	max int
	rng *rand.Rand
}

func (c *chunky) Read(p []byte) (int, error) {
	if len(c.src) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(c.src), 1+c.rng.IntN(c.max))
	copy(p, c.src[:n])
	c.src = c.src[n:]
	return n, nil
}

// greedy fills whatever space it is given, as a socket with a deep
// receive queue does, and counts the reads and the largest space asked.
type greedy struct {
	src          []byte
	reads, space int
}

func (g *greedy) Read(p []byte) (int, error) {
	g.space = max(g.space, len(p))
	if len(g.src) == 0 {
		return 0, io.EOF
	}
	g.reads++
	n := copy(p, g.src)
	g.src = g.src[n:]
	return n, nil
}

func source(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// TestMixedCallsReturnTheStream reads a stream with random Peek, Discard
// and Read calls of random sizes from readers that return random chunks,
// and checks that every byte comes back once, in order.
func TestMixedCallsReturnTheStream(t *testing.T) {
	for seed := uint64(0); seed < 40; seed++ {
		src := source(3<<20, seed)
		rng := rand.New(rand.NewPCG(seed, 2))
		var rd io.Reader = &chunky{src: src, max: 1 + rng.IntN(3<<20), rng: rng}
		if seed%4 == 0 {
			rd = iotest.HalfReader(rd)
		}
		b := New(rd, 1<<(4+rng.IntN(13)))
		var got []byte
		for len(got) < len(src) {
			want := src[len(got):]
			switch rng.IntN(3) {
			case 0:
				n := rng.IntN(len(b.small) + 1)
				p, err := b.Peek(n)
				if err != nil && !(errors.Is(err, io.EOF) && len(want) < n) {
					t.Fatalf("seed %d: Peek(%d) at %d: %v", seed, n, len(got), err)
				}
				if !bytes.Equal(p, want[:len(p)]) {
					t.Fatalf("seed %d: Peek(%d) at %d returned other bytes", seed, n, len(got))
				}
			case 1:
				n := min(rng.IntN(200<<10), len(want))
				d, err := b.Discard(n)
				if err != nil || d != n {
					t.Fatalf("seed %d: Discard(%d) at %d = %d, %v", seed, n, len(got), d, err)
				}
				got = append(got, want[:n]...)
			default:
				p := make([]byte, 1+rng.IntN(300<<10))
				n, err := b.Read(p)
				if err != nil {
					t.Fatalf("seed %d: Read at %d: %v", seed, len(got), err)
				}
				if !bytes.Equal(p[:n], want[:n]) {
					t.Fatalf("seed %d: Read at %d returned other bytes", seed, len(got))
				}
				got = append(got, p[:n]...)
			}
		}
		if n, err := b.Read(make([]byte, 10)); n != 0 || err != io.EOF {
			t.Fatalf("seed %d: Read at the end = %d, %v; want 0, EOF", seed, n, err)
		}
		b.Release()
	}
}

// TestBusyConnectionReadsAhead: once a read fills the small buffer, the
// reader asks for a large one's worth at a time, and goes back to its small
// buffer when a read finds little and nothing is left.
func TestBusyConnectionReadsAhead(t *testing.T) {
	g := &greedy{src: source(4<<20, 7)}
	b := New(g, 64<<10)
	frame := make([]byte, 72<<10)
	if _, err := io.ReadFull(b, frame); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if _, err := io.ReadFull(b, frame); err != nil {
			t.Fatal(err)
		}
	}
	if b.large == nil || g.space < Large/2 {
		t.Fatalf("after 21 frames of 72 KiB from a full socket: busy %v, largest read %d bytes; want a large buffer", b.large != nil, g.space)
	}
	if reads := g.reads; reads > 6 {
		t.Fatalf("21 frames of 72 KiB took %d reads; want the large buffer to take them in a few", reads)
	}

	// A burst of whole frames, then the client goes quiet: the read that
	// waits for it is offered the small buffer, the large one is back in
	// the pool.
	burst := &greedy{src: source(20*(72<<10), 9)}
	b3 := New(burst, 64<<10)
	for range 20 {
		if _, err := io.ReadFull(b3, frame); err != nil {
			t.Fatal(err)
		}
	}
	burst.space = 0
	if _, err := b3.Read(frame); err != io.EOF {
		t.Fatalf("Read after the burst: %v; want EOF", err)
	}
	if b3.large != nil || burst.space > 64<<10 {
		t.Fatalf("waiting after a burst: busy %v, offered %d bytes; want the small buffer", b3.large != nil, burst.space)
	}

	// The peer slows down: the reader lets go of the large buffer once it
	// has served what it held, before it reads (and maybe waits) again.
	b2 := New(&chunky{src: source(1<<20, 8), max: 100, rng: rand.New(rand.NewPCG(1, 1))}, 64<<10)
	b2.large = largePool.Get().(*[]byte)
	b2.buf = *b2.large
	for range 3 {
		if _, err := b2.Read(make([]byte, 50)); err != nil {
			t.Fatal(err)
		}
		if _, err := b2.Discard(b2.Buffered()); err != nil {
			t.Fatal(err)
		}
	}
	if b2.large != nil {
		t.Fatal("a reader fed 100 bytes at a time still holds its large buffer")
	}
}

// TestErrorsArriveAfterTheData: a read error is returned once the bytes
// read with it are consumed.
func TestErrorsArriveAfterTheData(t *testing.T) {
	boom := errors.New("boom")
	b := New(io.MultiReader(bytes.NewReader([]byte("abcdef")), iotest.ErrReader(boom)), 16)
	p, err := b.Peek(4)
	if err != nil || string(p) != "abcd" {
		t.Fatalf("Peek(4) = %q, %v", p, err)
	}
	p, err = b.Peek(10)
	if !errors.Is(err, boom) || string(p) != "abcdef" {
		t.Fatalf("Peek(10) = %q, %v; want abcdef and the error", p, err)
	}
	if n, err := b.Discard(6); n != 6 || err != nil {
		t.Fatalf("Discard(6) = %d, %v", n, err)
	}
	if _, err := b.Read(make([]byte, 4)); !errors.Is(err, io.EOF) && !errors.Is(err, boom) {
		t.Fatalf("Read after the data: %v", err)
	}
	if _, err := b.Peek(32); !errors.Is(err, bufio.ErrBufferFull) {
		t.Fatalf("Peek beyond the small buffer: %v; want ErrBufferFull", err)
	}
}
