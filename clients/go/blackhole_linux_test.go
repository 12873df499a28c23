package client

import (
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"
)

// startBlackHole is a loopback address that never answers a connection attempt, as a
// firewall that drops packets does: a listening socket that never accepts, with its
// accept queue full, so that Linux drops every further SYN and connect waits. net.Listen
// cannot make one (it chooses the backlog itself), hence the raw socket with backlog 0.
func startBlackHole(t *testing.T) string {
	t.Helper()
	loopback := [4]byte{127, 0, 0, 1}
	socket := func(flags int) int {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC|flags, 0)
		if err != nil {
			t.Fatalf("socket: %v", err)
		}
		t.Cleanup(func() { syscall.Close(fd) })
		return fd
	}
	listener := socket(0)
	if err := syscall.Bind(listener, &syscall.SockaddrInet4{Addr: loopback}); err != nil {
		t.Fatalf("bind: %v", err)
	}
	if err := syscall.Listen(listener, 0); err != nil {
		t.Fatalf("listen: %v", err)
	}
	name, err := syscall.Getsockname(listener)
	if err != nil {
		t.Fatalf("getsockname: %v", err)
	}
	port := name.(*syscall.SockaddrInet4).Port
	// The first connection fills the queue of one; the others wait as any later one will.
	for i := 0; i < 4; i++ {
		err := syscall.Connect(socket(syscall.SOCK_NONBLOCK), &syscall.SockaddrInet4{Addr: loopback, Port: port})
		if err != nil && err != syscall.EINPROGRESS {
			t.Fatalf("filling the accept queue: %v", err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	addr := fmt.Sprintf("127.0.0.1:%d", port)

	// The tests mean nothing unless connecting there really hangs (a refusal is instant).
	conn, err := net.DialTimeout("tcp", addr, 700*time.Millisecond)
	if err == nil {
		conn.Close()
		t.Fatal("the black hole accepted a connection")
	}
	if netErr, ok := err.(net.Error); !ok || !netErr.Timeout() {
		t.Fatalf("connecting to the black hole failed at once (%v) instead of hanging", err)
	}
	return addr
}
