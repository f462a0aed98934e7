//! The OpenMP team that torch's CPU operations run on, lent to the Rust kernels.
//!
//! Between two torch operations torch's OpenMP workers spin, waiting for the next parallel
//! region; a kernel of ours on one thread leaves them spinning (process CPU time counts it),
//! and threads of our own would have to share the cores with them. Running our kernel as an
//! OpenMP parallel region of the same runtime (`GOMP_parallel`, looked up in the process:
//! torch loads libgomp with its symbols global) hands the work to those very workers, as a
//! torch operation would. Where no OpenMP runtime is loaded (no torch, another platform) the
//! kernels run on the calling thread. Results do not depend on the split: the kernels that
//! use it are element-wise with an exact combination (max, integer sums).

#![allow(unsafe_code)]

use std::ffi::{c_int, c_uint, c_void};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

type Body = unsafe extern "C" fn(*mut c_void);

struct Omp {
    parallel: unsafe extern "C" fn(Body, *mut c_void, c_uint, c_uint),
    thread_num: unsafe extern "C" fn() -> c_int,
    num_threads: unsafe extern "C" fn() -> c_int,
    max_threads: unsafe extern "C" fn() -> c_int,
}

static OMP: OnceLock<Omp> = OnceLock::new();

#[cfg(target_os = "linux")]
fn find() -> Option<Omp> {
    use std::ffi::{CStr, c_char};
    unsafe extern "C" {
        fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    }
    // RTLD_DEFAULT (a null handle): every object loaded with global symbols
    let get = |name: &CStr| {
        // SAFETY: dlsym reads a NUL-terminated name and returns an address or null.
        let p = unsafe { dlsym(std::ptr::null_mut(), name.as_ptr()) };
        (!p.is_null()).then_some(p)
    };
    let (p, t, n, m) = (
        get(c"GOMP_parallel")?,
        get(c"omp_get_thread_num")?,
        get(c"omp_get_num_threads")?,
        get(c"omp_get_max_threads")?,
    );
    // SAFETY: these are the OpenMP runtime's entry points with their documented C
    // signatures (libgomp's ABI, which LLVM's libomp also exports).
    unsafe {
        Some(Omp {
            parallel: std::mem::transmute::<
                *mut c_void,
                unsafe extern "C" fn(Body, *mut c_void, c_uint, c_uint),
            >(p),
            thread_num: std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> c_int>(t),
            num_threads: std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> c_int>(n),
            max_threads: std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> c_int>(m),
        })
    }
}

#[cfg(not(target_os = "linux"))]
fn find() -> Option<Omp> {
    None
}

/// The runtime, once one is loaded (looked up again until then: torch may be imported after
/// this module).
fn omp() -> Option<&'static Omp> {
    if let Some(o) = OMP.get() {
        return Some(o);
    }
    let found = find()?;
    Some(OMP.get_or_init(|| found))
}

/// How many threads a parallel region would have now (torch's `get_num_threads()` on
/// torch's thread); 1 without a runtime.
pub fn threads() -> usize {
    // SAFETY: a query of the runtime's state, callable from any thread.
    omp().map_or(1, |o| unsafe { (o.max_threads)() }.max(1) as usize)
}

struct Job<'a> {
    omp: &'a Omp,
    parts: usize,
    run: &'a (dyn Fn(usize) + Sync),
    panicked: AtomicBool,
}

unsafe extern "C" fn body(data: *mut c_void) {
    // SAFETY: `data` is the `Job` that `parallel` keeps alive until every thread of the
    // region has returned (GOMP_parallel ends with the team's barrier).
    let job = unsafe { &*(data as *const Job<'_>) };
    // SAFETY: queries of the runtime inside its own parallel region.
    let (me, team) = unsafe { ((job.omp.thread_num)(), (job.omp.num_threads)()) };
    let (mut i, step) = (me.max(0) as usize, team.max(1) as usize);
    while i < job.parts {
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (job.run)(i))).is_err() {
            job.panicked.store(true, Ordering::Relaxed);
        }
        i += step;
    }
}

/// Runs `run(i)` for every i in 0..parts: on the OpenMP team where a runtime is loaded and
/// `parts` > 1 (each thread its share of the parts), else on this thread in order. Panics if
/// a part panicked (after every part has run).
pub fn parallel(parts: usize, run: &(dyn Fn(usize) + Sync)) {
    let Some(o) = omp().filter(|_| parts > 1) else {
        (0..parts).for_each(run);
        return;
    };
    let job = Job {
        omp: o,
        parts,
        run,
        panicked: AtomicBool::new(false),
    };
    // SAFETY: `body` only reads `job` through the pointer, and GOMP_parallel returns after
    // every thread of the region has finished with it; 0 threads: the runtime's default
    // (torch's setting), flags 0.
    unsafe { (o.parallel)(body, &job as *const Job<'_> as *mut c_void, 0, 0) };
    assert!(
        !job.panicked.load(Ordering::Relaxed),
        "a part of a parallel kernel panicked"
    );
}
