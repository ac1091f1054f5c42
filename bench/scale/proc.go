package scale

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is a child process. Lines it prints on stdout can be waited for with
// WaitLine; its stderr goes to the given writer.
type Proc struct {
	Name  string
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{}
	err   error // set before done closes
}

// Start starts bin with args as a child process named name (for messages),
// with extraEnv added to this process's environment.
func Start(name string, stderr io.Writer, extraEnv []string, bin string, args ...string) (*Proc, error) {
	if bin == "" {
		return nil, fmt.Errorf("%w: Start %s: empty binary path", ErrInvalid, name)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stderr = stderr
	cmd.Env = append(os.Environ(), extraEnv...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, cmd: cmd, lines: make(chan string, 64), done: make(chan struct{})}
	var read sync.WaitGroup
	read.Go(func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default: // nobody waits for it
			}
		}
	})
	go func() {
		read.Wait()
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// PID returns the process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// WaitLine waits for a line on stdout starting with prefix and returns the
// rest of it, trimmed.
func (p *Proc) WaitLine(ctx context.Context, prefix string) (string, error) {
	for {
		select {
		case l := <-p.lines:
			if rest, ok := strings.CutPrefix(l, prefix); ok {
				return strings.TrimSpace(rest), nil
			}
		case <-p.done:
			return "", fmt.Errorf("%w: %s before printing %q: %v", ErrExited, p.Name, prefix, p.err)
		case <-ctx.Done():
			return "", fmt.Errorf("%s: waiting for %q: %w", p.Name, prefix, ctx.Err())
		}
	}
}

// RSS returns the resident set size and its peak (VmRSS, VmHWM) in bytes.
func (p *Proc) RSS() (rss, peak int64, err error) { return ReadRSS(p.PID()) }

// ReadRSS reads VmRSS and VmHWM of process pid from /proc, in bytes.
func ReadRSS(pid int) (rss, peak int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("read memory of process %d: %w", pid, err)
	}
	for line := range strings.Lines(string(b)) {
		key, val, ok := strings.Cut(line, ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		f := strings.Fields(val) // "123456 kB"
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, fmt.Errorf("process %d: unexpected %s line %q", pid, key, line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("process %d: %s: %w", pid, key, err)
		}
		if key == "VmRSS" {
			rss = kb * 1024
		} else {
			peak = kb * 1024
		}
	}
	if rss == 0 {
		return 0, 0, fmt.Errorf("process %d: no VmRSS in /proc status", pid)
	}
	return rss, peak, nil
}

// Stop sends SIGTERM and waits up to grace for the process to exit, then
// kills it.
func (p *Proc) Stop(grace time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		return p.Kill()
	}
}

// Kill kills the process with SIGKILL and waits for it.
func (p *Proc) Kill() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("kill %s: %w", p.Name, err)
	}
	<-p.done
	return nil
}

// CPU returns the CPU time (user and system) the process has used so far.
func (p *Proc) CPU() (time.Duration, error) { return ReadCPU(p.PID()) }

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's times:
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// ReadCPU reads the user and system CPU time of process pid from
// /proc/<pid>/stat.
func ReadCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read CPU time of process %d: %w", pid, err)
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// fields are counted after its closing one. utime and stime are fields
	// 14 and 15, so the 12th and 13th after it.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("process %d: unexpected /proc stat %q", pid, b)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("process %d: /proc stat times %q: %w", pid, f[11:13], err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// Sampler samples the RSS of processes every interval and keeps the highest.
type Sampler struct {
	mu   sync.Mutex
	max  map[int]int64
	stop chan struct{}
	done chan struct{}
}

// Sample starts sampling pids every interval until Stop.
func Sample(interval time.Duration, pids ...int) *Sampler {
	s := &Sampler{max: map[int]int64{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			for _, pid := range pids {
				if rss, _, err := ReadRSS(pid); err == nil {
					s.mu.Lock()
					s.max[pid] = max(s.max[pid], rss)
					s.mu.Unlock()
				}
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// Stop stops sampling and returns the highest RSS seen per pid, in bytes.
func (s *Sampler) Stop() map[int]int64 {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max
}

// DiskUsage returns the bytes allocated on disk under dir.
func DiskUsage(dir string) (int64, error) {
	var total int64
	err := walk(dir, func(st *syscall.Stat_t) { total += st.Blocks * 512 })
	return total, err
}
