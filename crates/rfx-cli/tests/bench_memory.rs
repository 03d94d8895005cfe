//! The peak memory of `rfx bench` with its baselines. The only test of this file, so that the
//! children's peak RSS that `getrusage` reports is that of the one `rfx` it runs.

use crate::common;

#[test]
fn the_unfused_baseline_holds_live_values_not_a_buffer_set_per_op() {
    // The UR5 Jacobian has 485 HIR ops. Its fused kernel's inputs and outputs in every rotation
    // set take about 2^18 elements per array; the unfused path's pool holds the values live at
    // once. One full set of rotation buffers per op (3 MB each) peaked at 1.3 GB; the pool
    // peaks at about 70 MB.
    let out = common::rfx(&[
        "bench",
        "--size",
        "4096",
        "--iterations",
        "3",
        "--filter",
        "control_fk_ur5_jacobian",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` is a valid, writable `rusage`; `getrusage` fills it.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, usage.as_mut_ptr()) };
    assert_eq!(rc, 0);
    // SAFETY: `getrusage` succeeded, so it wrote the whole struct.
    let peak_kib = unsafe { usage.assume_init() }.ru_maxrss;
    let peak_mib = peak_kib / 1024;
    eprintln!("peak RSS of rfx bench: {peak_mib} MiB");
    assert!(peak_mib > 10, "{peak_mib} MiB: not the bench process");
    assert!(peak_mib < 250, "peak RSS {peak_mib} MiB");
}
