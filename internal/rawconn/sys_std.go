//go:build unix && (!linux || race)

package rawconn

import "syscall"

// rawRead and rawWrite go through the syscall package here: on systems
// other than Linux, and under the race detector, which learns from
// syscall.Write and syscall.Read that a write happened before the read
// that took its bytes (a reader may be in the same process).
func rawRead(fd uintptr, b []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), b)
	return max(n, 0), errno(err)
}

func rawWrite(fd uintptr, b []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), b)
	return max(n, 0), errno(err)
}

func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	if e, ok := err.(syscall.Errno); ok {
		return e
	}
	return syscall.EIO
}
