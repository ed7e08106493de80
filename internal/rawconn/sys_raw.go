//go:build linux && !race

package rawconn

import (
	"syscall"
	"unsafe"
)

// rawRead and rawWrite are read(2) and write(2) without the scheduler's
// bookkeeping for system calls that may block: for non-blocking
// descriptors only.
func rawRead(fd uintptr, b []byte) (int, syscall.Errno) {
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	return int(n), e
}

func rawWrite(fd uintptr, b []byte) (int, syscall.Errno) {
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	return int(n), e
}
