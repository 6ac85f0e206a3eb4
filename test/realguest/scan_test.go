package realguest

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// secret is something the disk scan looks for, in the forms it may be stored in.
type secret struct {
	name  string
	forms [][]byte
}

// hit is where a secret was found: byte offsets in the raw disk and the files holding it.
type hit struct {
	offsets []int64
	files   []string
}

// privateKeyMarkers are the forms any private key takes when written out: PEM, and the DER
// encodings of the P-256 keys the agent generates (SEC 1 and PKCS #8).
var privateKeyMarkers = secret{name: "a private key", forms: [][]byte{
	[]byte("PRIVATE KEY-----"),
	{0x30, 0x77, 0x02, 0x01, 0x01, 0x04, 0x20},
	{0x30, 0x81, 0x87, 0x02, 0x01, 0x00, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01},
}}

// rawDisk converts a guest's qcow2 overlay (with its backing template) to a sparse raw image in
// dir: every block the guest sees, freed ones included.
func rawDisk(t *testing.T, overlay, dir string) string {
	t.Helper()
	raw := filepath.Join(dir, "disk.raw")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "qemu-img", "convert", "-O", "raw", overlay, raw).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img convert: %v: %s", err, out)
	}
	return raw
}

// guestWritten lists the byte ranges of the disk the guest wrote (held by the overlay itself, not
// its backing template), from qemu-img map.
func guestWritten(t *testing.T, overlay string) [][2]int64 {
	t.Helper()
	out, err := exec.Command("qemu-img", "map", "--output=json", overlay).Output()
	if err != nil {
		t.Fatalf("qemu-img map: %v", err)
	}
	var extents []struct {
		Start  int64 `json:"start"`
		Length int64 `json:"length"`
		Depth  int   `json:"depth"`
		Data   bool  `json:"data"`
	}
	if err := json.Unmarshal(out, &extents); err != nil {
		t.Fatalf("qemu-img map: %v", err)
	}
	var ranges [][2]int64
	for _, e := range extents {
		if e.Depth == 0 && e.Data {
			ranges = append(ranges, [2]int64{e.Start, e.Start + e.Length})
		}
	}
	return ranges
}

// Linux lseek's whence values for sparse files.
const (
	seekData = 3
	seekHole = 4
)

// dataRanges lists the parts of a sparse file that hold data, so the holes of a mostly empty
// disk are not read.
func dataRanges(f *os.File, size int64) [][2]int64 {
	var ranges [][2]int64
	for off := int64(0); off < size; {
		start, err := f.Seek(off, seekData)
		if err != nil {
			break // ENXIO: no data after off
		}
		end, err := f.Seek(start, seekHole)
		if err != nil {
			end = size
		}
		ranges = append(ranges, [2]int64{start, end})
		off = end
	}
	return ranges
}

// scanRanges finds every form of every secret within ranges of the raw image; a secret's offsets
// are those of any of its forms.
func scanRanges(t *testing.T, raw string, ranges [][2]int64, secrets []secret) map[string]*hit {
	t.Helper()
	f, err := os.Open(raw)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if ranges == nil {
		st, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		ranges = dataRanges(f, st.Size())
	}
	longest := 0
	for _, s := range secrets {
		for _, form := range s.forms {
			longest = max(longest, len(form))
		}
	}
	hits := map[string]*hit{}
	const chunk = 16 << 20
	buf := make([]byte, chunk+longest)
	for _, r := range ranges {
		for off := r[0]; off < r[1]; off += chunk {
			n, err := f.ReadAt(buf[:min(int64(len(buf)), r[1]-off)], off)
			if err != nil && !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			data := buf[:n]
			for _, s := range secrets {
				for _, form := range s.forms {
					for i := 0; ; {
						j := bytes.Index(data[i:], form)
						// A match starting in the overlap is found again in the next chunk.
						if j < 0 || i+j >= chunk {
							break
						}
						h := hits[s.name]
						if h == nil {
							h = &hit{}
							hits[s.name] = h
						}
						h.offsets = append(h.offsets, off+int64(i+j))
						i += j + 1
					}
				}
			}
		}
	}
	return hits
}

// attributeFiles mounts the raw image's root partition read-only and names the files that hold
// each secret found, so a failure says where to look. It needs root and a loop device; without
// them the raw offsets alone are reported.
func attributeFiles(t *testing.T, raw string, secrets []secret, hits map[string]*hit) {
	t.Helper()
	if len(hits) == 0 || os.Geteuid() != 0 {
		return
	}
	dir := t.TempDir()
	offset, err := rootPartitionOffset(raw)
	if err != nil {
		t.Logf("cannot find the root partition to name the files: %v", err)
		return
	}
	// Writable, so that mounting replays the journal (on this copy): the files as the guest left
	// them, not as the last checkpoint did.
	loop, err := exec.Command("losetup", "--find", "--show", "--offset", strconv.FormatInt(offset, 10), raw).Output()
	if err != nil {
		t.Logf("no loop device to name the files: %v", err)
		return
	}
	dev := strings.TrimSpace(string(loop))
	defer func() { _ = exec.Command("losetup", "-d", dev).Run() }()
	if out, err := exec.Command("mount", "-o", "ro", dev, dir).CombinedOutput(); err != nil {
		t.Logf("cannot mount the guest's file system to name the files: %v: %s", err, out)
		return
	}
	defer func() { _ = exec.Command("umount", dir).Run() }()
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		for _, s := range secrets {
			h := hits[s.name]
			if h == nil {
				continue
			}
			for _, form := range s.forms {
				if bytes.Contains(data, form) {
					h.files = append(h.files, strings.TrimPrefix(path, dir))
					break
				}
			}
		}
		return nil
	})
	for _, h := range hits {
		sort.Strings(h.files)
	}
}

func (h *hit) String() string {
	return fmt.Sprintf("%d times in the raw disk (in freed blocks too, where more than in files); in files %v", len(h.offsets), h.files)
}

// rootPartitionOffset is the byte offset of the raw image's Linux partition (MBR type 0x83), the
// root file system hack/template.sh puts after the EFI system partition.
func rootPartitionOffset(raw string) (int64, error) {
	f, err := os.Open(raw)
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	mbr := make([]byte, 512)
	if _, err := io.ReadFull(f, mbr); err != nil {
		return 0, err
	}
	if mbr[510] != 0x55 || mbr[511] != 0xaa {
		return 0, errors.New("no MBR partition table")
	}
	for i := 0; i < 4; i++ {
		e := mbr[446+16*i : 446+16*(i+1)]
		if e[4] == 0x83 {
			return int64(binary.LittleEndian.Uint32(e[8:12])) * 512, nil
		}
	}
	return 0, errors.New("no Linux partition in the MBR")
}
