//! `RFX_DUMP=DIR` writes every stage of every compiled kernel (its own test binary, since it
//! sets a process-wide environment variable).

use rfx::Tensor;

#[test]
fn rfx_dump_writes_every_stage() {
    let dir = std::env::temp_dir().join(format!("rfx-dump-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // SAFETY: this test binary runs this one test; no other thread reads the environment.
    unsafe { std::env::set_var("RFX_DUMP", &dir) };
    let f = rfx::jit(rfx::Func::new(|x: Tensor| (x * 2.0).sin()).kernel_name("dumped"));
    let out = f.call((&[0.25f32, 0.5],)).expect("call");
    let got = out[0].as_slice::<f32>().expect("f32");
    for (g, e) in got.iter().zip([0.5f32.sin(), 1.0f32.sin()]) {
        assert!((g - e).abs() <= 2.0 * f32::EPSILON, "{g} vs {e}");
    }
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("dump dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let stages: Vec<&str> = names.iter().map(|n| n.rsplit('.').nth(1).unwrap_or("")).collect();
    assert_eq!(stages, ["clif", "hir", "lir", "mir", "opt"], "{names:?}");
    assert!(names.iter().all(|n| n.starts_with("dumped-")));
    let hir = std::fs::read_to_string(dir.join(names.iter().find(|n| n.ends_with(".hir.txt")).expect("hir")))
        .expect("read");
    assert!(hir.contains("sin"), "{hir}");
    let clif =
        std::fs::read_to_string(dir.join(names.iter().find(|n| n.ends_with(".clif.txt")).expect("clif")))
            .expect("read");
    assert!(clif.contains("function"), "{clif}");
    let _ = std::fs::remove_dir_all(&dir);
}
