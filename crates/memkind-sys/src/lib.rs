//! Raw FFI bindings to libmemkind, hand-written for placer against memkind 1.14
//! (Debian's `libmemkind-dev` 1.14.0, `/usr/include/memkind.h`). No bindgen: only the
//! declarations placer uses are here, copied from that header.
//!
//! Upstream memkind was discontinued in 2024 (the repository is archived); 1.14 is the
//! last release and what Debian ships, so these declarations are not expected to move.
//!
//! Everything here is `unsafe` to call; the safe wrapper lives in `placer-pools`
//! (`alloc::memkind`, behind its `memkind` feature).
//!
//! Linking: `build.rs` asks for `-lmemkind`, which Debian installs in the default
//! library search path.

// This crate is nothing but FFI declarations: the workspace-wide `unsafe_code = "deny"`
// cannot hold here.
#![allow(unsafe_code)]
// Names follow the C header exactly so they can be grepped for in memkind's docs.
#![allow(non_camel_case_types)]

use libc::{c_char, c_int, c_void, size_t, ssize_t};
use std::marker::{PhantomData, PhantomPinned};

/// `struct memkind`: opaque, only ever handled through a [`memkind_t`] pointer.
///
/// The zero-sized array plus the marker make it unconstructible, `!Send`, `!Sync` and
/// `!Unpin`, the usual stand-in for an extern type.
#[repr(C)]
pub struct memkind {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

impl std::fmt::Debug for memkind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("memkind { .. }")
    }
}

/// `typedef struct memkind *memkind_t;`
pub type memkind_t = *mut memkind;

// `enum memkind_const` in the header. The C enumerators are `int`; they are typed here
// as what they are used as (sizes).
/// Most kinds memkind can hold at once (static and created).
pub const MEMKIND_MAX_KIND: c_int = 512;
/// Buffer size `memkind_error_message` needs to never truncate.
pub const MEMKIND_ERROR_MESSAGE_SIZE: size_t = 128;
/// Smallest `max_size` `memkind_create_pmem` accepts: 16 MiB.
pub const MEMKIND_PMEM_MIN_SIZE: size_t = 1024 * 1024 * 16;

// Operation statuses (the anonymous enum in the header).
pub const MEMKIND_SUCCESS: c_int = 0;
pub const MEMKIND_ERROR_UNAVAILABLE: c_int = -1;
pub const MEMKIND_ERROR_MBIND: c_int = -2;
pub const MEMKIND_ERROR_MMAP: c_int = -3;
pub const MEMKIND_ERROR_MALLOC: c_int = -6;
pub const MEMKIND_ERROR_ENVIRON: c_int = -12;
pub const MEMKIND_ERROR_INVALID: c_int = -13;
pub const MEMKIND_ERROR_TOOMANY: c_int = -15;
pub const MEMKIND_ERROR_BADOPS: c_int = -17;
pub const MEMKIND_ERROR_HUGETLB: c_int = -18;
pub const MEMKIND_ERROR_MEMTYPE_NOT_AVAILABLE: c_int = -20;
pub const MEMKIND_ERROR_OPERATION_FAILED: c_int = -21;
pub const MEMKIND_ERROR_ARENAS_CREATE: c_int = -22;
pub const MEMKIND_ERROR_RUNTIME: c_int = -255;

unsafe extern "C" {
    // Static kinds: `extern memkind_t NAME;` globals, set once inside libmemkind and
    // never reassigned, so they are declared as immutable statics. Reading one is still
    // `unsafe` (it is foreign memory); the pointer it yields must not be destroyed.

    /// Regular system memory through memkind's jemalloc arenas, no NUMA policy.
    pub static MEMKIND_DEFAULT: memkind_t;
    /// Memory from every NUMA node that has CPUs (no high-bandwidth or PMEM nodes).
    pub static MEMKIND_REGULAR: memkind_t;
    /// Persistent memory exposed as a CPU-less NUMA node (KMEM DAX, `daxctl
    /// reconfigure-device --mode=system-ram`), closest such node.
    pub static MEMKIND_DAX_KMEM: memkind_t;

    /// Memkind API version as `major * 1000000 + minor * 1000 + patch`.
    pub fn memkind_get_version() -> c_int;

    /// Writes the message for status `err` into `msg` (at most `size` bytes, including
    /// the terminating NUL). Use [`MEMKIND_ERROR_MESSAGE_SIZE`] bytes.
    pub fn memkind_error_message(err: c_int, msg: *mut c_char, size: size_t);

    /// Creates a file-backed kind on a temporary file in directory `dir`, limited to
    /// `max_size` bytes (at least [`MEMKIND_PMEM_MIN_SIZE`]; 0 means limited only by
    /// the file system). Writes the new kind to `*kind` and returns a status.
    pub fn memkind_create_pmem(dir: *const c_char, max_size: size_t, kind: *mut memkind_t) -> c_int;

    /// Destroys a kind returned by `memkind_create_pmem` or `memkind_create_kind`.
    /// Undefined for static kinds and for a kind already destroyed.
    pub fn memkind_destroy_kind(kind: memkind_t) -> c_int;

    /// [`MEMKIND_SUCCESS`] when `kind` can allocate on this machine, a negative status
    /// otherwise.
    pub fn memkind_check_available(kind: memkind_t) -> c_int;

    /// Bytes `kind` could allocate from (node capacity, or file/file system size for a
    /// file-backed kind), -1 on failure.
    pub fn memkind_get_capacity(kind: memkind_t) -> ssize_t;

    /// `malloc` from `kind`; NULL on failure.
    pub fn memkind_malloc(kind: memkind_t, size: size_t) -> *mut c_void;

    /// `calloc` from `kind`; NULL on failure.
    pub fn memkind_calloc(kind: memkind_t, num: size_t, size: size_t) -> *mut c_void;

    /// `posix_memalign` from `kind`. `alignment` must be a power of two and a multiple
    /// of `sizeof(void*)`. Returns 0 on success and, like `posix_memalign`, a positive
    /// errno (`EINVAL`, `ENOMEM`) on failure, not a memkind status.
    pub fn memkind_posix_memalign(kind: memkind_t, memptr: *mut *mut c_void, alignment: size_t, size: size_t) -> c_int;

    /// Frees `ptr`, which `kind` allocated. `kind` may be NULL (memkind then looks the
    /// kind up, slowly); `ptr` may be NULL.
    pub fn memkind_free(kind: memkind_t, ptr: *mut c_void);
}

/// The message memkind gives for status `err`, as a Rust string.
///
/// Safe: the buffer handed to memkind is exactly [`MEMKIND_ERROR_MESSAGE_SIZE`] bytes.
pub fn error_message(err: c_int) -> String {
    let mut buf = [0 as c_char; MEMKIND_ERROR_MESSAGE_SIZE];
    // SAFETY: `buf` is a live, writable buffer of `MEMKIND_ERROR_MESSAGE_SIZE` bytes and
    // that size is what we pass; memkind writes at most `size` bytes, NUL included, and
    // accepts any `err` (unknown codes get a generic message).
    unsafe { memkind_error_message(err, buf.as_mut_ptr(), MEMKIND_ERROR_MESSAGE_SIZE) };
    // Never trust the NUL: stop at the first one or at the end of the buffer.
    let bytes: Vec<u8> = buf.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_is_version_1_14() {
        // SAFETY: takes no arguments and only reads a compile-time constant.
        let version = unsafe { memkind_get_version() };
        assert_eq!(version / 1000, 1014, "memkind version {version}");
    }

    #[test]
    fn the_default_kind_is_available_and_allocates() {
        // SAFETY: reading a static libmemkind initialises before main; it is never
        // written after that.
        let kind = unsafe { MEMKIND_DEFAULT };
        assert!(!kind.is_null());
        // SAFETY: `kind` is a valid static kind.
        assert_eq!(unsafe { memkind_check_available(kind) }, MEMKIND_SUCCESS);

        // SAFETY: valid kind, nonzero size.
        let p = unsafe { memkind_malloc(kind, 4096) }.cast::<u8>();
        assert!(!p.is_null());
        // SAFETY: `p` points to 4096 writable bytes that we own until the free below.
        unsafe {
            p.write_bytes(0xA5, 4096);
            assert_eq!(*p.add(4095), 0xA5);
            memkind_free(kind, p.cast());
        }

        // SAFETY: valid kind; 16 * 8 bytes is small.
        let z = unsafe { memkind_calloc(kind, 16, 8) }.cast::<u64>();
        assert!(!z.is_null());
        // SAFETY: `z` points to 16 zeroed, u64-aligned (malloc alignment) u64s, freed once.
        unsafe {
            assert!(std::slice::from_raw_parts(z, 16).iter().all(|&x| x == 0));
            memkind_free(kind, z.cast());
        }

        let mut aligned: *mut c_void = std::ptr::null_mut();
        // SAFETY: `aligned` is a valid out-pointer; 64 is a power of two and a multiple of
        // sizeof(void*).
        let status = unsafe { memkind_posix_memalign(kind, &mut aligned, 64, 1000) };
        assert_eq!(status, 0);
        assert_eq!(aligned as usize % 64, 0);
        // SAFETY: `aligned` came from this kind and is freed once.
        unsafe { memkind_free(kind, aligned) };
    }

    #[test]
    fn error_messages_are_readable() {
        let msg = error_message(MEMKIND_ERROR_INVALID);
        assert!(!msg.is_empty());
        assert!(msg.is_ascii(), "{msg:?}");
    }
}
