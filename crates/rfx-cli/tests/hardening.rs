//! The `rfx` command at its process edge, each probe of a hostile or broken environment kept as
//! a test: concurrent runs into one `--out`, planted links, commands that fail half way, closed
//! and full stdout, FIFOs and devices as inputs, sizes past memory, the exit-code scheme, and
//! inputs or flags that must be refused, not accepted silently. Arrays are small: none of
//! these depends on the element count.

use std::io::Read as _;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common;
use crate::fixtures;
use common::{RFX, rfx, temp_dir, write_npy};
use fixtures::{entries, raw_npy};

/// The file's shape, dtype descriptor and every element as `f64`, or why it is not one whole
/// `.npy` file (the data must end exactly where the header says).
fn read_whole_npy(path: &Path) -> Result<(Vec<u64>, String, Vec<f64>), String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let npy = npyz::NpyFile::new(&bytes[..]).map_err(|e| e.to_string())?;
    let shape = npy.shape().to_vec();
    let descr = npy.dtype().descr();
    let n: u64 = shape.iter().product();
    // Where the data starts: the magic, the version, the header-length field and the header.
    let header_len = match bytes.get(6) {
        Some(1) => 10 + u64::from(u16::from_le_bytes([bytes[8], bytes[9]])),
        _ => 12 + u64::from(u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]])),
    };
    let values: Vec<f64> = match descr.as_str() {
        "'<f4'" => npy
            .into_vec::<f32>()
            .map(|v| v.into_iter().map(f64::from).collect()),
        "'<f8'" => npy.into_vec::<f64>(),
        other => return Err(format!("unexpected dtype {other}")),
    }
    .map_err(|e| e.to_string())?;
    let item = if descr == "'<f4'" { 4 } else { 8 };
    if bytes.len() as u64 != header_len + n * item {
        return Err(format!(
            "{} bytes, the header declares {}",
            bytes.len(),
            header_len + n * item
        ));
    }
    Ok((shape, descr, values))
}

fn arg(name: &str, path: &Path) -> String {
    format!("{name}={}", path.display())
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Waits for `child` at most `limit`; a child still running then is killed and the test fails
/// (a hang is a regression, not a stuck CI job).
fn wait_at_most(mut child: Child, limit: Duration, what: &str) -> (ExitStatus, String) {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                e.read_to_string(&mut err).expect("stderr");
            }
            return (status, err);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn fifty_pairs_of_concurrent_runs_into_one_out_leave_whole_files_each_from_one_run() {
    let dir = temp_dir("concurrent");
    // Distinguishable runs: different dtypes, shapes and values, so a file mixing them (one
    // run's header with the other's data, or bytes of both) cannot pass for either.
    let (a, b) = (dir.join("a.npy"), dir.join("b.npy"));
    let a_values: Vec<f32> = (0..512).map(|i| i as f32 + 0.5).collect();
    let b_values: Vec<f64> = (0..96).map(|i| -(i as f64) - 0.25).collect();
    write_npy(&a, &[512], &a_values);
    write_npy(&b, &[8, 12], &b_values);
    let a_expected: Vec<f64> = a_values.iter().map(|&v| f64::from(v * 2.0)).collect();
    let b_expected: Vec<f64> = b_values.iter().map(|&v| v * 2.0).collect();
    let out = dir.join("out");
    let out_str = out.to_str().expect("utf-8");
    let (mut from_a, mut from_b) = (0, 0);
    for pair in 0..50 {
        let spawn = |input: &Path| {
            Command::new(RFX)
                .args([
                    "eval",
                    "x * 2.0",
                    "--backend",
                    "interp",
                    "--in",
                    &arg("x", input),
                    "--out",
                    out_str,
                ])
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn rfx")
        };
        let (first, second) = (spawn(&a), spawn(&b));
        for child in [first, second] {
            let (status, err) = wait_at_most(child, Duration::from_secs(60), "a concurrent eval");
            assert!(status.success(), "pair {pair}: {err}");
        }
        let (shape, descr, values) =
            read_whole_npy(&out.join("out.npy")).unwrap_or_else(|e| panic!("pair {pair}: {e}"));
        if shape == [512] && descr == "'<f4'" && values == a_expected {
            from_a += 1;
        } else if shape == [8, 12] && descr == "'<f8'" && values == b_expected {
            from_b += 1;
        } else {
            panic!("pair {pair}: a file from neither run: {descr} {shape:?} {values:?}");
        }
        assert_eq!(
            entries(&out),
            ["out.npy"],
            "pair {pair}: temporary files left behind"
        );
    }
    assert_eq!(from_a + from_b, 50);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn concurrent_runs_of_several_outputs_each_leave_whole_files() {
    let dir = temp_dir("concurrent-set");
    let (a, b) = (dir.join("a.npy"), dir.join("b.npy"));
    write_npy(&a, &[64], &(0..64).map(|i| i as f32).collect::<Vec<_>>());
    write_npy(&b, &[4, 4], &(0..16).map(|i| -(i as f64)).collect::<Vec<_>>());
    let out = dir.join("out");
    let out_str = out.to_str().expect("utf-8");
    for pair in 0..20 {
        let spawn = |input: &Path| {
            Command::new(RFX)
                .args([
                    "eval",
                    "p = x + 1.0; q = x * x",
                    "--outputs",
                    "p,q",
                    "--backend",
                    "interp",
                ])
                .args(["--in", &arg("x", input), "--out", out_str])
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn rfx")
        };
        let (first, second) = (spawn(&a), spawn(&b));
        for child in [first, second] {
            let (status, err) = wait_at_most(child, Duration::from_secs(60), "a concurrent eval");
            assert!(status.success(), "pair {pair}: {err}");
        }
        // Each file is whole and from one run; the two files may come from different runs.
        for (file, op) in [("p.npy", 0), ("q.npy", 1)] {
            let (shape, _, values) =
                read_whole_npy(&out.join(file)).unwrap_or_else(|e| panic!("pair {pair} {file}: {e}"));
            let source: Vec<f64> = if shape == [64] {
                (0..64).map(f64::from).collect()
            } else {
                assert_eq!(shape, [4, 4], "pair {pair} {file}");
                (0..16).map(|i| -f64::from(i)).collect()
            };
            let expected: Vec<f64> = source
                .iter()
                .map(|v| if op == 0 { v + 1.0 } else { v * v })
                .collect();
            assert_eq!(values, expected, "pair {pair} {file}");
        }
        assert_eq!(
            entries(&out),
            ["p.npy", "q.npy"],
            "pair {pair}: temporary files left behind"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn planted_links_are_never_followed_and_nothing_outside_the_output_directory_changes() {
    let dir = temp_dir("links");
    let x = dir.join("x.npy");
    write_npy(&x, &[3], &[1.0f64, 2.0, 3.0]);
    let out = dir.join("out");
    std::fs::create_dir(&out).expect("out");
    let (victim, victim2) = (dir.join("victim.txt"), dir.join("victim2.txt"));
    std::fs::write(&victim, "precious").expect("victim");
    std::fs::write(&victim2, "also precious").expect("victim2");
    // A predictable temporary name (`out.npy.tmp`) and the destination itself, both links out.
    std::os::unix::fs::symlink("../victim.txt", out.join("out.npy.tmp")).expect("link");
    std::os::unix::fs::symlink("../victim2.txt", out.join("out.npy")).expect("link");
    let before = entries(&dir);
    let res = rfx(&[
        "eval",
        "x * 3.0",
        "--in",
        &arg("x", &x),
        "--out",
        out.to_str().expect("utf-8"),
    ]);
    assert!(res.status.success(), "{}", stderr(&res));
    assert_eq!(std::fs::read_to_string(&victim).expect("victim"), "precious");
    assert_eq!(
        std::fs::read_to_string(&victim2).expect("victim2"),
        "also precious"
    );
    assert_eq!(
        entries(&dir),
        before,
        "nothing appeared or went outside the output directory"
    );
    // The destination link was replaced by the file; the planted temporary link is untouched.
    let meta = std::fs::symlink_metadata(out.join("out.npy")).expect("out.npy");
    assert!(meta.file_type().is_file(), "out.npy is a regular file now");
    let (shape, _, values) = read_whole_npy(&out.join("out.npy")).expect("out.npy");
    assert_eq!((shape, values), (vec![3], vec![3.0, 6.0, 9.0]));
    assert!(
        std::fs::symlink_metadata(out.join("out.npy.tmp"))
            .expect("tmp")
            .file_type()
            .is_symlink()
    );
    assert_eq!(entries(&out), ["out.npy", "out.npy.tmp"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every file of `dir` with its bytes.
fn snapshot(dir: &Path) -> Vec<(String, Option<Vec<u8>>)> {
    entries(dir)
        .into_iter()
        .map(|name| {
            let bytes = std::fs::read(dir.join(&name)).ok();
            (name, bytes)
        })
        .collect()
}

/// Runs `command` on the first input into `out` (writing `a.npy` and `b.npy`), puts a directory
/// where `b.npy` goes, runs it on the second input, and checks that the second run fails with
/// exit 1 and leaves `out` exactly as the first left it, `a.npy` holding `a_after_first`.
fn second_run_failing_on_b_changes_nothing(
    out: &Path,
    command: impl Fn(&Path) -> Output,
    (x1, x2): (&Path, &Path),
    a_after_first: [f64; 3],
) {
    let first = command(x1);
    assert!(first.status.success(), "{}", stderr(&first));
    std::fs::remove_file(out.join("b.npy")).expect("remove");
    std::fs::create_dir(out.join("b.npy")).expect("dir");
    let before = snapshot(out);
    let res = command(x2);
    assert_eq!(res.status.code(), Some(1), "{}", stderr(&res));
    assert_eq!(snapshot(out), before);
    assert_eq!(read_whole_npy(&out.join("a.npy")).expect("a").2, a_after_first);
}

#[test]
fn a_command_failing_on_a_later_output_leaves_every_earlier_output_as_it_was() {
    let dir = temp_dir("all-or-nothing");
    let (x1, x2) = (dir.join("x1.npy"), dir.join("x2.npy"));
    write_npy(&x1, &[3], &[1.0f64, 2.0, 3.0]);
    write_npy(&x2, &[3], &[-4.0f64, 5.0, 6.5]);

    // `grad` writes value.npy, then grad_x.npy.
    let g = dir.join("grad");
    let g_str = g.to_str().expect("utf-8");
    let first = rfx(&[
        "grad",
        "sum(x ** 2)",
        "--wrt",
        "x",
        "--in",
        &arg("x", &x1),
        "--out",
        g_str,
    ]);
    assert!(first.status.success(), "{}", stderr(&first));
    std::fs::remove_file(g.join("grad_x.npy")).expect("remove");
    std::fs::create_dir(g.join("grad_x.npy")).expect("a directory where grad_x.npy goes");
    std::fs::write(g.join("grad_x.npy").join("keep"), "x").expect("write");
    let before = snapshot(&g);
    let res = rfx(&[
        "grad",
        "sum(x ** 2)",
        "--wrt",
        "x",
        "--in",
        &arg("x", &x2),
        "--out",
        g_str,
    ]);
    assert_eq!(res.status.code(), Some(1), "{}", stderr(&res));
    assert!(stderr(&res).contains("grad_x.npy"), "{}", stderr(&res));
    assert_eq!(
        snapshot(&g),
        before,
        "value.npy was replaced, or a file was left behind"
    );
    assert_eq!(read_whole_npy(&g.join("value.npy")).expect("value").2, [14.0]);

    // `eval --outputs a,b`: b.npy cannot be written, so a.npy must keep its old contents.
    let e = dir.join("eval");
    let e_str = e.to_str().expect("utf-8");
    let eval = |x: &Path| {
        rfx(&[
            "eval",
            "a = x + 1.0; b = x * 2.0",
            "--outputs",
            "a,b",
            "--in",
            &arg("x", x),
            "--out",
            e_str,
        ])
    };
    second_run_failing_on_b_changes_nothing(&e, eval, (&x1, &x2), [2.0, 3.0, 4.0]);

    // `run` of a kernel file with two outputs: the same.
    let kernel = dir.join("two.rfx");
    std::fs::write(
        &kernel,
        "kernel two {\n  %x = input x : f64[3]\n  %a = neg %x : f64[3]\n  %b = mul %x, %x : f64[3]\n  output a = %a\n  output b = %b\n}\n",
    )
    .expect("write");
    let r = dir.join("run");
    let r_str = r.to_str().expect("utf-8");
    let run = |x: &Path| {
        rfx(&[
            "run",
            kernel.to_str().expect("utf-8"),
            "--in",
            &arg("x", x),
            "--out",
            r_str,
        ])
    };
    second_run_failing_on_b_changes_nothing(&r, run, (&x1, &x2), [-1.0, -2.0, -3.0]);

    // An --out that is a file is refused, and the file is left alone.
    let file = dir.join("a-file");
    std::fs::write(&file, "keep").expect("write");
    let res = run_to(&x1, &file);
    assert_eq!(res.status.code(), Some(1), "{}", stderr(&res));
    assert!(stderr(&res).contains("not a directory"), "{}", stderr(&res));
    assert_eq!(std::fs::read_to_string(&file).expect("file"), "keep");

    // A missing output directory is made, parents included.
    let fresh = dir.join("fresh").join("deeper");
    std::fs::create_dir_all(dir.join("fresh")).expect("fresh");
    let res = rfx(&[
        "eval",
        "a = x + 1.0; b = x * 2.0",
        "--outputs",
        "a,b",
        "--in",
        &arg("x", &x1),
        "--out",
        fresh.to_str().expect("utf-8"),
    ]);
    assert!(res.status.success(), "{}", stderr(&res));
    assert_eq!(entries(&fresh), ["a.npy", "b.npy"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `rfx eval 'x * 2.0'` on `x` into `out`.
fn run_to(x: &Path, out: &Path) -> Output {
    rfx(&[
        "eval",
        "x * 2.0",
        "--in",
        &arg("x", x),
        "--out",
        out.to_str().expect("utf-8"),
    ])
}

/// Runs rfx with stdout a pipe whose read end is closed before rfx writes: it must end quietly
/// with exit 0 (documented), never panic.
fn closed_stdout(args: &[&str]) {
    let mut child = Command::new(RFX)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rfx");
    drop(child.stdout.take());
    let (status, err) = wait_at_most(child, Duration::from_secs(120), &format!("{args:?}"));
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert_eq!(status.code(), Some(0), "{args:?}: {err}");
    assert!(err.is_empty(), "{args:?}: a closed pipe ends quietly, got: {err}");
}

#[test]
fn a_closed_stdout_ends_every_command_quietly() {
    let dir = temp_dir("pipe");
    let x = dir.join("x.npy");
    write_npy(&x, &[4], &[1.0f32, 2.0, 3.0, 4.0]);
    let x_arg = arg("x", &x);
    closed_stdout(&["eval", "sin(x) * 2.0", "--in", &x_arg]);
    closed_stdout(&[
        "dump",
        "sin(x) + 1.0",
        "--stage",
        "asm",
        "--in-shapes",
        "x=f32[4]",
    ]);
    closed_stdout(&["dump", "sin(x) + 1.0", "--stage", "mir", "--in", &x_arg]);
    closed_stdout(&["dot", "sin(x) + 1.0", "--in-shapes", "x=f32[4]"]);
    closed_stdout(&[
        "bench",
        "--size",
        "16",
        "--iterations",
        "2",
        "--filter",
        "add",
        "--no-baselines",
    ]);
    closed_stdout(&["--help"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_full_stdout_is_a_clear_error_with_exit_1() {
    if !Path::new("/dev/full").exists() {
        eprintln!("skipped: this system has no /dev/full");
        return;
    }
    let dir = temp_dir("full");
    let x = dir.join("x.npy");
    write_npy(&x, &[2], &[1.0f32, 2.0]);
    let x_arg = arg("x", &x);
    let cases: [&[&str]; 5] = [
        &["eval", "x + 1.0", "--in", &x_arg],
        &["dump", "x + 1.0", "--stage", "hir", "--in-shapes", "x=f32[2]"],
        &["dot", "x + 1.0", "--in-shapes", "x=f32[2]"],
        &[
            "bench",
            "--size",
            "16",
            "--iterations",
            "2",
            "--filter",
            "add",
            "--no-baselines",
        ],
        &["--version"],
    ];
    for args in cases {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let out = Command::new(RFX)
            .args(args)
            .stdout(full)
            .output()
            .expect("run rfx");
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(
            err.contains("cannot write to stdout") && err.contains("No space left"),
            "{args:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn inputs_are_regular_files_only_and_a_fifo_does_not_hang() {
    let dir = temp_dir("inputs");
    let fifo = dir.join("fifo.npy");
    let made = Command::new("mkfifo").arg(&fifo).status();
    if made.is_ok_and(|s| s.success()) {
        // Nobody ever writes to it: a plain open would block forever.
        let child = Command::new(RFX)
            .args(["eval", "x * 2.0", "--in", &arg("x", &fifo)])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn rfx");
        let (status, err) = wait_at_most(child, Duration::from_secs(20), "rfx reading a FIFO");
        assert_eq!(status.code(), Some(1), "{err}");
        assert!(err.contains("not a regular file"), "{err}");
        // A kernel file is read the same way.
        let kernel_fifo = dir.join("fifo.rfx");
        assert!(
            Command::new("mkfifo")
                .arg(&kernel_fifo)
                .status()
                .is_ok_and(|s| s.success())
        );
        let k = kernel_fifo.to_str().expect("utf-8");
        for args in [vec!["run", k], vec!["dump", k, "--stage", "hir"]] {
            let cmd = args[0];
            let child = Command::new(RFX)
                .args(&args)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn rfx");
            let (status, err) = wait_at_most(child, Duration::from_secs(20), "rfx reading a FIFO kernel");
            assert_eq!(status.code(), Some(1), "{cmd}: {err}");
            assert!(err.contains("not a regular file"), "{cmd}: {err}");
        }
    } else {
        eprintln!("skipped the FIFO case: `mkfifo` is not available");
    }
    for special in ["/dev/zero", "/dev/null"] {
        if !Path::new(special).exists() {
            continue;
        }
        let child = Command::new(RFX)
            .args(["eval", "x * 2.0", "--in", &format!("x={special}")])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn rfx");
        let (status, err) = wait_at_most(child, Duration::from_secs(20), special);
        assert_eq!(status.code(), Some(1), "{special}: {err}");
        assert!(err.contains("not a regular file"), "{special}: {err}");
        // As a kernel file: /dev/zero would otherwise be read until memory runs out.
        let child = Command::new(RFX)
            .args(["run", special])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn rfx");
        let (status, err) = wait_at_most(child, Duration::from_secs(20), special);
        assert_eq!(status.code(), Some(1), "run {special}: {err}");
        assert!(err.contains("not a regular file"), "run {special}: {err}");
    }
    let res = rfx(&["eval", "x * 2.0", "--in", &arg("x", &dir)]);
    assert_eq!(res.status.code(), Some(1), "{}", stderr(&res));
    assert!(stderr(&res).contains("not a regular file"), "{}", stderr(&res));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_zero_dimension_is_an_empty_array_whatever_the_other_is() {
    let dir = temp_dir("empty");
    for (i, shape) in ["(4611686018427387904, 0)", "(0, 4611686018427387904)"]
        .into_iter()
        .enumerate()
    {
        let x = dir.join(format!("x{i}.npy"));
        std::fs::write(&x, raw_npy("<f4", shape, &[])).expect("write");
        let out = dir.join(format!("o{i}"));
        let res = rfx(&[
            "eval",
            "x * 2.0",
            "--in",
            &arg("x", &x),
            "--out",
            out.to_str().expect("utf-8"),
        ]);
        assert!(res.status.success(), "{shape}: {}", stderr(&res));
        let (dims, descr, values) = read_whole_npy(&out.join("out.npy")).expect("out.npy");
        let expected: Vec<u64> = if i == 0 {
            vec![1 << 62, 0]
        } else {
            vec![0, 1 << 62]
        };
        assert_eq!(
            (dims, descr.as_str(), values.len()),
            (expected, "'<f4'", 0),
            "{shape}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_input_file_is_read_no_further_than_its_header_declares() {
    let dir = temp_dir("trailing");
    let x = dir.join("x.npy");
    let data: Vec<u8> = [1.5f32, 2.5].iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut bytes = raw_npy("<f4", "(2,)", &data);
    bytes.extend_from_slice(&[0xAB; 4096]);
    std::fs::write(&x, bytes).expect("write");
    let res = rfx(&["eval", "x * 2.0", "--in", &arg("x", &x)]);
    assert!(res.status.success(), "{}", stderr(&res));
    assert_eq!(String::from_utf8_lossy(&res.stdout), "out: f32[2] = [3.0, 5.0]\n");
    // A header longer than the file, and a shape needing more data than the file has.
    std::fs::write(&x, &raw_npy("<f4", "(2,)", &data)[..40]).expect("write");
    let res = rfx(&["eval", "x * 2.0", "--in", &arg("x", &x)]);
    assert_eq!(res.status.code(), Some(1), "{}", stderr(&res));
    assert!(stderr(&res).contains("the header claims"), "{}", stderr(&res));
    std::fs::write(&x, raw_npy("<f4", "(1099511627776,)", &data)).expect("write");
    let res = rfx(&["eval", "x * 2.0", "--in", &arg("x", &x)]);
    assert_eq!(res.status.code(), Some(1), "{}", stderr(&res));
    assert!(
        stderr(&res).contains("needs 4398046511104 bytes"),
        "{}",
        stderr(&res)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sizes_past_memory_are_errors_before_anything_is_allocated() {
    let dir = temp_dir("sizes");
    let x = dir.join("x.npy");
    write_npy(&x, &[1], &[1.0f32]);
    // 10^18 f32 elements: 4 EB, more than any address space.
    for backend in ["cpu", "interp"] {
        let res = rfx(&[
            "eval",
            "broadcast_to(x, [1000000000000, 1000000])",
            "--backend",
            backend,
            "--in",
            &arg("x", &x),
        ]);
        let err = stderr(&res);
        assert_eq!(res.status.code(), Some(1), "{backend}: {err}");
        assert!(
            err.contains("needs 4000000000000000000 bytes, more than can be allocated"),
            "{err}"
        );
    }
    // Compiling such a kernel (no run, nothing allocated for data) plans its loops by the
    // shape's extents, never by a list as long as a row.
    for stage in ["clif", "asm"] {
        let res = rfx(&[
            "dump",
            "broadcast_to(x, [1000000000000, 1000000])",
            "--stage",
            stage,
            "--in-shapes",
            "x=f32[1]",
        ]);
        let err = stderr(&res);
        assert_eq!(res.status.code(), Some(0), "{stage}: {err}");
        assert!(!res.stdout.is_empty(), "{stage}");
    }
    let res = rfx(&[
        "bench",
        "--size",
        "99999999999",
        "--iterations",
        "2",
        "--filter",
        "add",
    ]);
    let err = stderr(&res);
    assert_eq!(res.status.code(), Some(1), "{err}");
    assert!(
        err.contains("size 99999999999: kernel `add` needs about"),
        "{err}"
    );
    assert!(!err.contains("memory allocation"), "{err}");
    // Every size is checked before the first runs.
    let res = rfx(&[
        "bench",
        "--sizes",
        "16,99999999999",
        "--iterations",
        "2",
        "--filter",
        "add",
    ]);
    assert_eq!(res.status.code(), Some(1), "{}", stderr(&res));
    assert!(res.stdout.is_empty(), "{}", String::from_utf8_lossy(&res.stdout));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn exit_codes_are_0_1_2_and_limits_are_user_errors() {
    let dir = temp_dir("codes");
    let x = dir.join("x.npy");
    write_npy(&x, &[3], &[1.0f32, 2.0, 3.0]);
    // Usage errors, from the argument parser: 2.
    for args in [
        &["eval", "x", "--in", "x3.npy"][..],
        &["dump", "x", "--stage", "foo", "--in-shapes", "x=f32[3]"],
        &["eval", "-x", "--in-shapes", "x=f32[3]"],
        &["evaluate"],
    ] {
        let res = rfx(args);
        assert_eq!(res.status.code(), Some(2), "{args:?}: {}", stderr(&res));
    }
    // A `pad` past 2^31 elements is a documented limit: the user's error (1), not internal.
    let kernel = dir.join("pad.rfx");
    std::fs::write(
        &kernel,
        "kernel k {\n  %x = input x : f32[3]\n  %p = pad %x low [0] : f32[3000000000]\n  %s = sum %p axes [0] : f32[]\n  output s = %s\n}\n",
    )
    .expect("write");
    for backend in ["cpu", "interp"] {
        let res = rfx(&[
            "run",
            kernel.to_str().expect("utf-8"),
            "--backend",
            backend,
            "--in",
            &arg("x", &x),
        ]);
        let err = stderr(&res);
        assert_eq!(res.status.code(), Some(1), "{backend}: {err}");
        assert!(!err.contains("internal"), "{err}");
        assert!(err.contains("`i32` does not hold"), "{err}");
    }
    let res = rfx(&["dump", kernel.to_str().expect("utf-8"), "--stage", "mir"]);
    assert_eq!(res.status.code(), Some(1), "{}", stderr(&res));
    assert!(!stderr(&res).contains("internal"), "{}", stderr(&res));
    // An expression starting with `-` goes after `--`.
    let res = rfx(&["eval", "--in", &arg("x", &x), "--", "-x"]);
    assert!(res.status.success(), "{}", stderr(&res));
    assert_eq!(
        String::from_utf8_lossy(&res.stdout),
        "out: f32[3] = [-1.0, -2.0, -3.0]\n"
    );
    // A duration past what a clock holds is the user's error, not a panic.
    let res = rfx(&["fuzz", "--minutes", "1e307", "--kernels", "1"]);
    assert_eq!(res.status.code(), Some(1), "{}", stderr(&res));
    assert!(stderr(&res).contains("too long"), "{}", stderr(&res));
    // A backend `rfx bench` does not know is the user's error.
    let res = rfx(&["bench", "--backend", "tpu", "--size", "16", "--iterations", "2"]);
    assert_eq!(res.status.code(), Some(1), "{}", stderr(&res));
    assert!(stderr(&res).contains("unknown backend `tpu`"), "{}", stderr(&res));
    // Success: 0.
    let res = rfx(&["eval", "x + 1.0", "--in", &arg("x", &x)]);
    assert_eq!(res.status.code(), Some(0), "{}", stderr(&res));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn nothing_the_user_gave_is_silently_ignored() {
    let dir = temp_dir("silent");
    let (x, y) = (dir.join("x.npy"), dir.join("y.npy"));
    write_npy(&x, &[3], &[1.0f32, 2.0, 3.0]);
    write_npy(&y, &[3], &[4.0f32, 5.0, 6.0]);

    // An --in the expression does not use.
    for cmd in [
        vec!["eval", "x * 2.0"],
        vec!["grad", "sum(x * x)", "--wrt", "x"],
        vec!["dump", "x * 2.0", "--stage", "hir"],
        vec!["dot", "x * 2.0"],
    ] {
        let (x_arg, y_arg) = (arg("x", &x), arg("y", &y));
        let mut args = cmd.clone();
        args.extend(["--in", &x_arg, "--in", &y_arg]);
        let res = rfx(&args);
        assert_eq!(res.status.code(), Some(1), "{cmd:?}: {}", stderr(&res));
        assert!(
            stderr(&res).contains("input `y` is not used by the expression"),
            "{}",
            stderr(&res)
        );
    }

    // RFX_DUMP set but empty: no dump anywhere, the current directory included.
    let cwd = dir.join("cwd");
    std::fs::create_dir(&cwd).expect("cwd");
    let res = Command::new(RFX)
        .args(["eval", "x * 3.0", "--in", &arg("x", &x)])
        .env("RFX_DUMP", "")
        .current_dir(&cwd)
        .output()
        .expect("run rfx");
    assert!(res.status.success(), "{}", stderr(&res));
    assert!(entries(&cwd).is_empty(), "{:?}", entries(&cwd));

    // A file named like an expression is not read: `x` is the expression `x`.
    std::fs::write(cwd.join("x"), "kernel nope { }").expect("write");
    let res = Command::new(RFX)
        .args(["dump", "x", "--stage", "hir", "--in-shapes", "x=f32[2]"])
        .current_dir(&cwd)
        .output()
        .expect("run rfx");
    assert!(res.status.success(), "{}", stderr(&res));
    let text = String::from_utf8_lossy(&res.stdout);
    assert!(
        text.contains("input x : f32[2]") && !text.contains("nope"),
        "{text}"
    );
    let res = Command::new(RFX)
        .args(["dump", "x", "--stage", "hir"])
        .current_dir(&cwd)
        .output()
        .expect("run rfx");
    assert_eq!(res.status.code(), Some(1));
    assert!(
        stderr(&res).contains("a kernel file's name ends in .rfx"),
        "{}",
        stderr(&res)
    );

    // --in-shapes (or --in) with a kernel file, and both with an expression, are refused.
    let kernel = dir.join("k.rfx");
    std::fs::write(
        &kernel,
        "kernel k {\n  %x = input x : f32[3]\n  output y = %x\n}\n",
    )
    .expect("write");
    let k = kernel.to_str().expect("utf-8");
    let x_arg = arg("x", &x);
    for args in [
        vec!["dump", k, "--stage", "hir", "--in-shapes", "x=f32[5]"],
        vec!["dot", k, "--in", &x_arg],
    ] {
        let res = rfx(&args);
        assert_eq!(res.status.code(), Some(1), "{args:?}");
        assert!(stderr(&res).contains("is a kernel file"), "{}", stderr(&res));
    }
    let res = rfx(&[
        "dump",
        "x * 2.0",
        "--stage",
        "hir",
        "--in-shapes",
        "x=f32[5]",
        "--in",
        &x_arg,
    ]);
    assert_eq!(res.status.code(), Some(1));
    assert!(stderr(&res).contains("not both"), "{}", stderr(&res));

    // --save-dir naming a file is refused before any kernel runs.
    let file = dir.join("a-file");
    std::fs::write(&file, "").expect("write");
    let res = rfx(&[
        "fuzz",
        "--kernels",
        "1000000",
        "--save-dir",
        file.to_str().expect("utf-8"),
    ]);
    assert_eq!(res.status.code(), Some(1), "{}", stderr(&res));
    assert!(stderr(&res).contains("--save-dir"), "{}", stderr(&res));
    assert!(res.stdout.is_empty(), "no kernel ran");
    let _ = std::fs::remove_dir_all(&dir);
}
