//! libmemkind regions: a kind (static, or a file-backed PMEM kind this process created)
//! and 64-byte aligned, zeroed allocations from it.
//!
//! memkind is thread-safe: every entry point may be called from any thread, with any
//! kind, concurrently. The kind pointers are process-global (static kinds) or live until
//! `memkind_destroy_kind` (created kinds), which only [`MemkindKind`]'s drop calls, after
//! every region holding its `Arc` has been freed.

use crate::{ALIGN, PoolError};
use memkind_sys as ffi;
use std::ffi::{CString, c_void};
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::ptr::NonNull;
use std::sync::Arc;

/// What to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemkindSpec {
    /// `MEMKIND_DEFAULT`: ordinary memory through memkind's allocator.
    Default,
    /// `MEMKIND_DAX_KMEM`: persistent memory onlined as a CPU-less NUMA node.
    DaxKmem,
    /// A file-backed kind (`memkind_create_pmem`) on a temporary file in `dir`, usually
    /// an fsdax mount, holding at most `max_bytes` (at least 16 MiB).
    Pmem { dir: PathBuf, max_bytes: u64 },
}

/// An opened kind.
pub struct MemkindKind {
    kind: ffi::memkind_t,
    spec: MemkindSpec,
}

// SAFETY: `kind` is either a static kind (a process-global pointer that is never freed)
// or a kind created by `memkind_create_pmem` that only our `Drop` destroys. memkind's
// functions are thread-safe for any kind, so the handle may move to another thread.
unsafe impl Send for MemkindKind {}
// SAFETY: `&MemkindKind` only allows reading the pointer and passing it to memkind's
// thread-safe allocation functions; nothing is mutated through a shared reference.
unsafe impl Sync for MemkindKind {}

impl fmt::Debug for MemkindKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemkindKind").field("spec", &self.spec).field("kind", &self.kind).finish()
    }
}

impl MemkindKind {
    /// Opens a kind: for static kinds, checks `memkind_check_available`; for `Pmem`,
    /// checks the directory and size, then calls `memkind_create_pmem`.
    pub fn open(spec: &MemkindSpec) -> Result<Arc<MemkindKind>, PoolError> {
        let backend = label(spec);
        let unavailable = |reason: String| PoolError::BackendUnavailable { backend: backend.clone(), reason };
        let kind = match spec {
            MemkindSpec::Default | MemkindSpec::DaxKmem => {
                // SAFETY: reading an `extern memkind_t` global that libmemkind sets at
                // load time and never writes again.
                let kind = unsafe {
                    match spec {
                        MemkindSpec::DaxKmem => ffi::MEMKIND_DAX_KMEM,
                        _ => ffi::MEMKIND_DEFAULT,
                    }
                };
                if kind.is_null() {
                    return Err(unavailable("libmemkind exports a NULL kind".to_string()));
                }
                // SAFETY: `kind` is a non-NULL static kind, valid for the whole process.
                let status = unsafe { ffi::memkind_check_available(kind) };
                if status != ffi::MEMKIND_SUCCESS {
                    let hint = match spec {
                        MemkindSpec::DaxKmem => {
                            "; MEMKIND_DAX_KMEM needs persistent memory onlined as a CPU-less NUMA node \
                             (daxctl reconfigure-device --mode=system-ram)"
                        }
                        _ => "",
                    };
                    return Err(unavailable(format!(
                        "memkind_check_available failed: {} (status {status}){hint}",
                        ffi::error_message(status)
                    )));
                }
                kind
            }
            MemkindSpec::Pmem { dir, max_bytes } => {
                let min = ffi::MEMKIND_PMEM_MIN_SIZE as u64;
                if *max_bytes < min {
                    return Err(unavailable(format!(
                        "max_bytes {max_bytes} for {} is below memkind's minimum for a file-backed kind, \
                         MEMKIND_PMEM_MIN_SIZE = {min} bytes ({})",
                        dir.display(),
                        size_text(min)
                    )));
                }
                let max_size = usize::try_from(*max_bytes)
                    .map_err(|_| unavailable(format!("max_bytes {max_bytes} does not fit this platform's size_t")))?;
                match std::fs::metadata(dir) {
                    Ok(m) if m.is_dir() => {}
                    Ok(_) => return Err(unavailable(format!("{} is not a directory", dir.display()))),
                    Err(e) => return Err(unavailable(format!("directory {}: {e}", dir.display()))),
                }
                let c_dir = CString::new(dir.as_os_str().as_bytes())
                    .map_err(|_| unavailable(format!("directory {} contains a NUL byte", dir.display())))?;
                let mut kind: ffi::memkind_t = std::ptr::null_mut();
                // SAFETY: `c_dir` is a NUL-terminated string alive for the call, and
                // `kind` is a valid out-pointer; `max_size` >= MEMKIND_PMEM_MIN_SIZE.
                let status = unsafe { ffi::memkind_create_pmem(c_dir.as_ptr(), max_size, &mut kind) };
                if status != ffi::MEMKIND_SUCCESS || kind.is_null() {
                    return Err(unavailable(format!(
                        "memkind_create_pmem in {} failed: {} (status {status})",
                        dir.display(),
                        ffi::error_message(status)
                    )));
                }
                kind
            }
        };
        Ok(Arc::new(MemkindKind { kind, spec: spec.clone() }))
    }

    /// e.g. "memkind MEMKIND_DAX_KMEM", "memkind pmem file-backed kind in /tmp/x (max 64 MiB)".
    pub fn label(&self) -> String {
        label(&self.spec)
    }

    fn is_created(&self) -> bool {
        matches!(self.spec, MemkindSpec::Pmem { .. })
    }
}

impl Drop for MemkindKind {
    fn drop(&mut self) {
        if self.is_created() {
            // The status is ignored: nothing useful can be done in a destructor (and a
            // panic here could abort during an unwind); memkind unlinks the backing file
            // at creation, so at worst its space stays in use until the process exits.
            //
            // SAFETY: `kind` came from `memkind_create_pmem`, is destroyed only here, and
            // every region allocated from it holds an `Arc` to this value, so none is
            // still live. Static kinds never reach this call.
            let _status = unsafe { ffi::memkind_destroy_kind(self.kind) };
        }
    }
}

fn label(spec: &MemkindSpec) -> String {
    match spec {
        MemkindSpec::Default => "memkind MEMKIND_DEFAULT".to_string(),
        MemkindSpec::DaxKmem => "memkind MEMKIND_DAX_KMEM".to_string(),
        MemkindSpec::Pmem { dir, max_bytes } => {
            format!("memkind pmem file-backed kind in {} (max {})", dir.display(), size_text(*max_bytes))
        }
    }
}

/// Exact sizes only: "64 MiB", "1 GiB", otherwise "12345 bytes".
fn size_text(bytes: u64) -> String {
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    match bytes {
        0 => "0 bytes".to_string(),
        b if b % GIB == 0 => format!("{} GiB", b / GIB),
        b if b % MIB == 0 => format!("{} MiB", b / MIB),
        b => format!("{b} bytes"),
    }
}

/// `len` zeroed bytes from a memkind kind, 64-byte aligned, freed on drop.
pub(crate) struct MemkindRegion {
    kind: Arc<MemkindKind>,
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the region owns its allocation exclusively (no other pointer to it exists), so
// moving it to another thread moves sole ownership; `memkind_free` may be called from any
// thread, and the `Arc<MemkindKind>` it holds is itself Send + Sync.
unsafe impl Send for MemkindRegion {}
// SAFETY: shared access only yields `&[u8]`; mutation requires `&mut self`.
unsafe impl Sync for MemkindRegion {}

impl fmt::Debug for MemkindRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemkindRegion")
            .field("kind", &self.kind.label())
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .finish()
    }
}

impl MemkindRegion {
    /// `len` zeroed bytes, 64-byte aligned, from `kind`. A zero `len` still allocates
    /// one granule so the pointer is valid. `None` when memkind refuses (out of memory,
    /// or a file-backed kind is full).
    pub(crate) fn allocate_zeroed(kind: &Arc<MemkindKind>, len: usize) -> Option<MemkindRegion> {
        // Whole granules, as the pool accounts them; a slice may not exceed isize::MAX.
        let size = len.max(1).checked_next_multiple_of(ALIGN)?;
        if size > isize::MAX as usize {
            return None;
        }
        let mut raw: *mut c_void = std::ptr::null_mut();
        // SAFETY: `kind.kind` is a live kind (the Arc keeps created kinds alive), `raw` is
        // a valid out-pointer, and ALIGN (64) is a power of two and a multiple of
        // sizeof(void*).
        let status = unsafe { ffi::memkind_posix_memalign(kind.kind, &mut raw, ALIGN, size) };
        if status != 0 {
            return None;
        }
        let ptr = NonNull::new(raw.cast::<u8>())?;
        // SAFETY: memkind just handed us `size` writable bytes at `ptr`, exclusively ours.
        // Writing them zeroes the memory and faults every page in now, on this kind.
        unsafe { ptr.as_ptr().write_bytes(0, size) };
        Some(MemkindRegion { kind: Arc::clone(kind), ptr, len })
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` points to at least `len` initialised (zeroed at allocation) bytes
        // owned by `self` until drop; `len` <= isize::MAX; the borrow of `self` keeps them
        // from being mutated or freed while the slice lives.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, and `&mut self` guarantees this is the only access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for MemkindRegion {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `memkind_posix_memalign` on `self.kind`, which is still
        // alive (we hold an Arc), and is freed exactly once, here.
        unsafe { ffi::memkind_free(self.kind.kind, self.ptr.as_ptr().cast()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_name_the_kind_and_the_directory() {
        assert_eq!(label(&MemkindSpec::DaxKmem), "memkind MEMKIND_DAX_KMEM");
        let spec = MemkindSpec::Pmem { dir: PathBuf::from("/tmp/x"), max_bytes: 64 << 20 };
        assert_eq!(label(&spec), "memkind pmem file-backed kind in /tmp/x (max 64 MiB)");
        assert_eq!(size_text(3 << 30), "3 GiB");
        assert_eq!(size_text(1000), "1000 bytes");
    }

    #[test]
    fn zero_length_regions_still_have_an_aligned_address() {
        let kind = MemkindKind::open(&MemkindSpec::Default).expect("MEMKIND_DEFAULT is always available");
        let mut r = MemkindRegion::allocate_zeroed(&kind, 0).expect("one granule");
        assert!(r.bytes().is_empty());
        assert!(r.bytes_mut().is_empty());
        assert_eq!(r.ptr.as_ptr() as usize % ALIGN, 0);
    }

    #[test]
    fn impossible_sizes_are_refused_not_wrapped() {
        let kind = MemkindKind::open(&MemkindSpec::Default).expect("MEMKIND_DEFAULT is always available");
        assert!(MemkindRegion::allocate_zeroed(&kind, usize::MAX).is_none());
        assert!(MemkindRegion::allocate_zeroed(&kind, isize::MAX as usize).is_none());
        // Representable, but far more than any machine has: memkind itself says no.
        assert!(MemkindRegion::allocate_zeroed(&kind, 1 << 60).is_none());
    }
}
