//! The Cortex-M4F worked example (crates/rfx-codegen-c/firmware/cortex-m4f) run as a test: its
//! two kernels (`tilt_filter.rfx`, a complementary filter, and `pid.rfx`, a PID step) exported
//! through the API `rfx export` uses, compiled with the firmware (vector table, reset handler,
//! semihosting, no C library) by `arm-none-eabi-gcc -std=c99 -O2 -mcpu=cortex-m4 -mthumb
//! -mfloat-abi=hard -mfpu=fpv4-sp-d16 -Wall -Wextra -Werror`, linked for QEMU's `mps2-an386`
//! and run there (`qemu-system-arm -semihosting-config enable=on,target=native`). Every step's
//! printed bits must be those of the LIR interpreter running the same loop: both kernels hold
//! exact ops only.
//!
//! Skipped, with a message, where `arm-none-eabi-gcc` or `qemu-system-arm` is missing, unless
//! `RFX_REQUIRE_ARM_GCC=1` (for the compiler) or `RFX_REQUIRE_QEMU=1` (for QEMU) is set, as CI
//! sets them: then that is a failure.
//!
//! The same firmware's startup then runs the exportable conformance cases and the saved
//! corpus on the Cortex-M4F: the shared batch harness's drivers, linked with newlib's
//! semihosting C library (`--specs=rdimon.specs`) for `printf` and `malloc`, each under QEMU.
//! Exact ops must give the interpreter's bits there too (`f32` on the FPU, `f64` through
//! libgcc's soft-float routines, `sqrt` of `f64` through the export's integer square root), and
//! each transcendental case must lie within 4 ULP of the interpreter's `f64` oracle.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{CORTEX_M4F_CFLAGS, Job, Toolchain, check_on, corpus_kernels, lower_kernel};
use rfx_check::conformance::{cases, inputs};
use rfx_codegen_c::{ExportError, c_source};
use rfx_ir::interp::{Mode, run_lir};
use rfx_ir::lir::LirProgram;
use rfx_ir::testgen::{TestRng, random_inputs};
use rfx_ir::{Array, ArrayData, ArrayView};
use rfx_lower::order_inputs;

/// The control loop's length in the firmware (`STEPS` in main.c).
const STEPS: u32 = 64;

/// Seconds QEMU may run (the firmware takes well under one).
const QEMU_TIMEOUT: &str = "30";

fn firmware_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("firmware/cortex-m4f")
}

fn tool_found(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Whether `tool` is present; when it is not, fails if `require_var` is `1` and otherwise
/// prints why the test is skipped.
fn present_or_required(tool: &str, require_var: &str, package: &str) -> bool {
    if tool_found(tool) {
        return true;
    }
    assert!(
        std::env::var(require_var).as_deref() != Ok("1"),
        "{tool} not found and {require_var}=1 (Debian package {package})"
    );
    eprintln!("skipped: {tool} not found (Debian package {package})");
    false
}

/// The example's kernel `name` (`NAME.rfx`), optimized and lowered as `rfx export` does.
fn lowered(name: &str) -> LirProgram {
    let text = std::fs::read_to_string(firmware_dir().join(format!("{name}.rfx"))).expect("read the kernel");
    let kernel = rfx_ir::hir::parse(&text).unwrap_or_else(|e| panic!("{name}.rfx: {e}"));
    lower_kernel(&kernel).expect("lowers")
}

/// The firmware's sensor model (main.c): small integers over powers of two, exact in `f32`.
fn gyro_rate(t: u32) -> f32 {
    ((t * 37 % 61) as i32 - 30) as f32 / 64.0
}
fn accel_y(t: u32) -> f32 {
    ((t * 13 % 29) as i32 - 14) as f32 / 256.0
}
fn accel_z(t: u32) -> f32 {
    1.0 - (t % 5) as f32 / 512.0
}
fn setpoint(t: u32) -> f32 {
    if t < STEPS / 2 { 0.0 } else { 0.0625 }
}

/// Runs `program` on scalar-like `f32[1]` inputs given by name; returns its outputs by name.
fn run_named(program: &LirProgram, inputs: &[(&str, f32)]) -> Vec<(String, f32)> {
    let arrays: Vec<(&str, Array)> = inputs
        .iter()
        .map(|&(name, v)| (name, Array::new(vec![1], ArrayData::F32(vec![v])).expect("array")))
        .collect();
    let views: Vec<(&str, ArrayView<'_>)> = arrays.iter().map(|(n, a)| (*n, a.view())).collect();
    let ordered = order_inputs(program, &views).expect("bind the inputs");
    let outputs = run_lir(program, &ordered, Mode::Native).expect("interpret");
    program
        .outputs()
        .zip(outputs)
        .map(|((_, name, _), array)| match array.data() {
            ArrayData::F32(v) if v.len() == 1 => (name.to_string(), v[0]),
            other => panic!("output `{name}` is not f32[1]: {other:?}"),
        })
        .collect()
}

fn output(outputs: &[(String, f32)], name: &str) -> f32 {
    outputs
        .iter()
        .find(|(n, _)| n == name)
        .map(|&(_, v)| v)
        .unwrap_or_else(|| panic!("no output `{name}`"))
}

/// The lines the firmware must print: its loop run by the LIR interpreter.
fn interpreter_lines(filter: &LirProgram, pid: &LirProgram) -> Vec<String> {
    let (mut angle, mut integral) = (0.0f32, 0.0f32);
    let mut lines = Vec::new();
    for t in 0..STEPS {
        let angle_prev = angle;
        let filtered = run_named(
            filter,
            &[
                ("angle_prev", angle_prev),
                ("gyro", gyro_rate(t)),
                ("accel_y", accel_y(t)),
                ("accel_z", accel_z(t)),
            ],
        );
        angle = output(&filtered, "angle");
        let controlled = run_named(
            pid,
            &[
                ("setpoint", setpoint(t)),
                ("measurement", angle),
                ("prev_measurement", angle_prev),
                ("integral", integral),
            ],
        );
        let command = output(&controlled, "command");
        integral = output(&controlled, "integral");
        lines.push(format!(
            "t={t} angle={:08x} command={:08x} integral={:08x}",
            angle.to_bits(),
            command.to_bits(),
            integral.to_bits()
        ));
    }
    lines.push("done".to_string());
    lines
}

/// Exports both kernels into `dir`, builds the firmware there and returns the ELF's path.
fn build_firmware(dir: &Path, filter: &LirProgram, pid: &LirProgram) -> PathBuf {
    for (name, program) in [("tilt_filter", filter), ("pid", pid)] {
        let export = c_source(program, name).unwrap_or_else(|e| panic!("{name}: {e}"));
        std::fs::write(dir.join(format!("{name}.h")), export.header).expect("write the header");
        std::fs::write(dir.join(format!("{name}.c")), export.source).expect("write the source");
    }
    let fw = firmware_dir();
    let elf = dir.join("fw.elf");
    let out = Command::new("arm-none-eabi-gcc")
        .args(CORTEX_M4F_CFLAGS)
        .arg("-I")
        .arg(dir)
        .arg("-I")
        .arg(&fw)
        .args(["main.c", "startup.c", "semihost.c"].map(|f| fw.join(f)))
        .args(["tilt_filter.c", "pid.c"].map(|f| dir.join(f)))
        .args(["-nostdlib", "-T"])
        .arg(fw.join("mps2_an386.ld"))
        .arg("-lgcc")
        .arg("-o")
        .arg(&elf)
        .output()
        .expect("run arm-none-eabi-gcc");
    assert!(
        out.status.success(),
        "the firmware does not build:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    elf
}

#[test]
fn cortex_m4f_firmware_matches_the_interpreter_under_qemu() {
    let gcc = present_or_required("arm-none-eabi-gcc", "RFX_REQUIRE_ARM_GCC", "gcc-arm-none-eabi");
    let qemu = present_or_required("qemu-system-arm", "RFX_REQUIRE_QEMU", "qemu-system-arm");
    if !gcc || !qemu {
        return;
    }
    let filter = lowered("tilt_filter");
    let pid = lowered("pid");
    let dir = tempfile::tempdir().expect("temp dir");
    let elf = build_firmware(dir.path(), &filter, &pid);
    // The semihosting console goes to a file: without a chardev QEMU writes it to stdout or
    // stderr depending on whether stdin is a terminal.
    let console = dir.path().join("console.txt");
    let mut chardev = std::ffi::OsString::from("file,id=semihost,path=");
    chardev.push(&console);
    let run = Command::new("timeout")
        .arg(QEMU_TIMEOUT)
        .args(["qemu-system-arm", "-M", "mps2-an386", "-nographic", "-chardev"])
        .arg(chardev)
        .args([
            "-semihosting-config",
            "enable=on,target=native,chardev=semihost",
            "-kernel",
        ])
        .arg(&elf)
        .output()
        .expect("run qemu-system-arm");
    let stdout = std::fs::read_to_string(&console).unwrap_or_default();
    assert!(
        run.status.success(),
        "the firmware failed ({:?}):\n{stdout}\n{}",
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );
    let got: Vec<&str> = stdout.lines().collect();
    let want = interpreter_lines(&filter, &pid);
    assert_eq!(got.len(), want.len(), "the firmware printed:\n{stdout}");
    for (t, (got, want)) in got.iter().zip(&want).enumerate() {
        assert_eq!(got.trim_end(), want, "step {t}");
    }
    documented_output_is_real(&want);
}

/// The output docs/export.md and the example's README show is the firmware's own, and the
/// Makefile builds with the flags tested here.
fn documented_output_is_real(lines: &[String]) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for doc in [root.join("docs/export.md"), firmware_dir().join("README.md")] {
        let text = std::fs::read_to_string(&doc).expect("read the document");
        let shown: Vec<&str> = text
            .split(['\n', '`'])
            .map(str::trim)
            .filter(|l| l.starts_with("t=") && l.contains(" angle="))
            .collect();
        assert!(!shown.is_empty(), "{} shows no output line", doc.display());
        for line in shown {
            let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
            assert!(
                lines.contains(&line),
                "{} shows `{line}`, which the firmware does not print",
                doc.display()
            );
        }
    }
    let makefile = std::fs::read_to_string(firmware_dir().join("Makefile")).expect("read the Makefile");
    let joined = makefile.replace("\\\n", " ");
    let cflags: Vec<&str> = joined
        .lines()
        .find_map(|l| l.strip_prefix("CFLAGS ="))
        .expect("the Makefile's CFLAGS")
        .split_whitespace()
        .collect();
    assert_eq!(cflags, CORTEX_M4F_CFLAGS, "the Makefile's CFLAGS");
}

/// The Cortex-M4F flags beyond the harness's own (`rfx_codegen_c::TESTED_FLAGS`).
const TARGET_FLAGS: &[&str] = &[
    "-mcpu=cortex-m4",
    "-mthumb",
    "-mfloat-abi=hard",
    "-mfpu=fpv4-sp-d16",
];

/// The harness's toolchain for the Cortex-M4F under QEMU: the firmware's startup and the
/// driver entry (`tests/support/cortex_m_driver_main.c`) compiled into `dir` once, the driver's
/// `main` renamed for it, newlib's semihosting C library, the firmware's linker script.
fn cortex_m4f(dir: &Path) -> Toolchain {
    let fw = firmware_dir();
    let support = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/cortex_m_driver_main.c");
    let mut flags: Vec<String> = TARGET_FLAGS.iter().map(|f| f.to_string()).collect();
    for source in [fw.join("startup.c"), fw.join("semihost.c"), support] {
        let stem = source.file_stem().and_then(|s| s.to_str()).unwrap_or("object");
        let object = dir.join(format!("{stem}.o"));
        let out = Command::new("arm-none-eabi-gcc")
            .args(CORTEX_M4F_CFLAGS)
            .arg("-c")
            .arg(&source)
            .arg("-o")
            .arg(&object)
            .output()
            .expect("run arm-none-eabi-gcc");
        assert!(
            out.status.success(),
            "{}: {}",
            source.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        flags.push(object.display().to_string());
    }
    flags.extend(
        [
            "-Dmain=driver_main",
            "--specs=rdimon.specs",
            "-nostartfiles",
            "-T",
        ]
        .map(String::from),
    );
    flags.push(fw.join("mps2_an386.ld").display().to_string());
    // newlib's stdout (`:tt`, with `target=native`) is QEMU's own stdout, written with blocking
    // writes. No `stdio` chardev: one makes QEMU's stdout non-blocking, and the driver's lines
    // are then lost whenever the test's reader falls behind (seen on a loaded machine).
    let runner = [
        "timeout",
        "300",
        "qemu-system-arm",
        "-M",
        "mps2-an386",
        "-display",
        "none",
        "-serial",
        "none",
        "-monitor",
        "none",
        "-semihosting-config",
        "enable=on,target=native",
        "-kernel",
    ];
    Toolchain {
        cc: "arm-none-eabi-gcc",
        flags,
        runner: runner.map(String::from).to_vec(),
    }
}

/// `job` when its program exports; `None` (counted in `refused`) when refused as unsupported.
fn exportable(job: Job, refused: &mut usize) -> Option<Job> {
    match c_source(&job.program, "probe") {
        Ok(_) => Some(job),
        Err(ExportError::Unsupported(_)) => {
            *refused += 1;
            None
        }
        Err(e) => panic!("{}: {e}", job.name),
    }
}

#[test]
fn conformance_and_corpus_match_the_interpreter_on_cortex_m4f_under_qemu() {
    let gcc = present_or_required("arm-none-eabi-gcc", "RFX_REQUIRE_ARM_GCC", "gcc-arm-none-eabi");
    let qemu = present_or_required("qemu-system-arm", "RFX_REQUIRE_QEMU", "qemu-system-arm");
    if !gcc || !qemu {
        return;
    }
    let mut refused = 0;
    let mut jobs: Vec<Job> = cases()
        .iter()
        .filter_map(|case| {
            let job = Job {
                name: case.name.clone(),
                program: lower_kernel(&case.kernel).expect("lowers"),
                inputs: inputs(case, 1),
                ulp_bound: case.transcendental.map(|_| 4),
            };
            exportable(job, &mut refused)
        })
        .collect();
    let conformance = jobs.len();
    let mut rng = TestRng::new(7);
    let mut with_transcendentals = 0;
    for (name, kernel) in corpus_kernels() {
        let inputs = random_inputs(&mut rng, &kernel, 0.1);
        // Kernels with a transcendental among other ops have no per-element bound; the aarch64
        // test checks those one op at a time.
        if common::probe::has_transcendental(&kernel) {
            with_transcendentals += 1;
            continue;
        }
        let job = Job {
            name,
            program: lower_kernel(&kernel).expect("lowers"),
            inputs,
            ulp_bound: None,
        };
        jobs.extend(exportable(job, &mut refused));
    }
    eprintln!(
        "Cortex-M4F: {conformance} conformance cases and {} corpus kernels, {refused} refused, \
         {with_transcendentals} corpus kernels with transcendentals left out",
        jobs.len() - conformance
    );
    assert!(conformance > 400, "only {conformance} conformance cases exported");
    let dir = tempfile::tempdir().expect("temp dir");
    check_on(&cortex_m4f(dir.path()), &jobs, &[&[]]);
}
