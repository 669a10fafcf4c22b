package imagebuild

import (
	"fmt"
	"net"
	"runtime"

	"golang.org/x/sys/unix"
)

// inBuildNetns runs fn on an OS thread moved into a new network namespace
// in which only the loopback interface is up, passing it a listener on
// 127.0.0.1 opened inside that namespace. A process fn starts (from the
// same goroutine) is born in the namespace: its only reachable address is
// that listener, where the egress proxy answers; the proxy itself dials
// from the other threads, which stay in the host's namespace. The thread is
// never unlocked, so it ends with the goroutine and never runs other Go
// code in the build's namespace. Needs root (CAP_SYS_ADMIN).
func inBuildNetns(fn func(l net.Listener) error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("build isolation: new network namespace: %w (building needs root)", err)
			return
		}
		if err := loopbackUp(); err != nil {
			errc <- fmt.Errorf("build isolation: loopback up: %w", err)
			return
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			errc <- fmt.Errorf("build isolation: proxy listener: %w", err)
			return
		}
		defer l.Close()
		errc <- fn(l)
	}()
	return <-errc
}

// loopbackUp sets IFF_UP on "lo" in the calling thread's network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
