package scale

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"
)

func walk(dir string, fn func(*syscall.Stat_t)) error {
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed meanwhile (the server compacts)
		}
		if err != nil {
			return err
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			fn(st)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("disk usage of %s: %w", dir, err)
	}
	return nil
}
