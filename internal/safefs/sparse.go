package safefs

import (
	"bytes"
	"io"
	"os"
)

// sparseBlock is the unit in which CreateSparseFrom looks for zeros: a block
// of this many zero bytes, aligned in the file, is skipped instead of
// written. 4 KiB is the block size of the file systems a cache lives on
// (ext4, xfs, btrfs, tmpfs); a smaller hole could not be left unallocated.
const sparseBlock = 4096

var zeroBlock [sparseBlock]byte

// CreateSparseFrom is CreateFrom for content that may hold long runs of
// zeros (the holes of a sparse tar entry, which archive/tar hands out as
// zeros): every aligned 4 KiB block of r that is all zeros is skipped with
// Seek instead of written, and the file is truncated to its final length, so
// zero runs never allocate disk (like `cp --sparse=always`). The content read
// back is exactly r's. It returns the number of bytes of r (the file's
// length), whether written or skipped.
func CreateSparseFrom(root *os.Root, name string, perm os.FileMode, r io.Reader) (int64, error) {
	f, err := root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return 0, err
	}
	n, err := copySparse(f, r)
	if err == nil {
		// A trailing hole was skipped, not written: the length comes from
		// the truncate (which allocates nothing).
		err = f.Truncate(n)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// copySparse copies r to f from f's start, seeking over aligned zero blocks.
// It returns the bytes of r consumed. The first read is of one block, and
// only a longer r gets the 128 KiB buffer: most files of a code checkout are
// small, and a 128 KiB buffer each was most of a trivial rerun's garbage.
func copySparse(f *os.File, r io.Reader) (int64, error) {
	buf := make([]byte, sparseBlock)
	var n int64    // bytes of r consumed (and the logical file offset)
	var hole int64 // zero bytes consumed but not yet skipped over in f
	for {
		m, rerr := Fill(r, buf)
		chunk := buf[:m]
		for len(chunk) > 0 {
			// Find the longest run of data blocks (or of zero blocks) at
			// the start of chunk; the last block may be short.
			size := min(sparseBlock, len(chunk))
			zero := bytes.Equal(chunk[:size], zeroBlock[:size])
			run := size
			for run < len(chunk) {
				next := min(sparseBlock, len(chunk)-run)
				if bytes.Equal(chunk[run:run+next], zeroBlock[:next]) != zero {
					break
				}
				run += next
			}
			if zero {
				hole += int64(run)
			} else {
				if hole > 0 {
					if _, err := f.Seek(hole, io.SeekCurrent); err != nil {
						return n, err
					}
					hole = 0
				}
				if _, err := f.Write(chunk[:run]); err != nil {
					return n, err
				}
			}
			n += int64(run)
			chunk = chunk[run:]
		}
		switch rerr {
		case nil:
		case io.EOF:
			return n, nil
		default:
			return n, rerr
		}
		if len(buf) == sparseBlock {
			// Block-aligned still: every chunk but the last is whole blocks.
			buf = make([]byte, 32*sparseBlock)
		}
	}
}

// Fill reads r until buf is full or r fails; io.EOF is returned as it is
// (unlike io.ReadFull, which would turn a short final read into
// io.ErrUnexpectedEOF, an error some readers return for real truncation).
func Fill(r io.Reader, buf []byte) (int, error) {
	m := 0
	for m < len(buf) {
		k, err := r.Read(buf[m:])
		m += k
		if err != nil {
			return m, err
		}
	}
	return m, nil
}
