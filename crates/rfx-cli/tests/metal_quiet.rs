//! The metal backend writes nothing on stderr when it succeeds, even where `XDG_RUNTIME_DIR` is
//! unset or invalid (a service, a container, a remote login over SSH). Left on, Mesa's Vulkan
//! device-selection layer connects to the Wayland display there, and `libwayland` prints
//! `error: XDG_RUNTIME_DIR is invalid or not set in the environment.` twice
//! (the `rfx` command turns the layer off with `NODEVICE_SELECT=1` at its start; the libraries
//! never write the environment).
//!
//! Without a wgpu adapter the test prints `skipped: …` and passes, unless
//! `RFX_REQUIRE_GPU_ADAPTER=1` (set by CI, which installs lavapipe).

use std::path::PathBuf;
use std::process::Command;

use crate::common;
use common::{RFX, temp_dir, write_npy};

fn input_file() -> PathBuf {
    let path = temp_dir("metal-quiet").join("x.npy");
    write_npy(&path, &[3], &[0.0f32, 1.0, 2.0]);
    path
}

#[test]
fn metal_eval_is_quiet_without_a_runtime_dir() {
    let input = input_file();
    let required = std::env::var("RFX_REQUIRE_GPU_ADAPTER").is_ok_and(|v| v == "1");
    // Unset, empty, and pointing nowhere.
    for runtime_dir in [None, Some(""), Some("/nonexistent/rfx-runtime-dir")] {
        let mut command = Command::new(RFX);
        command
            .args(["eval", "x*2.0+1.0", "--backend", "metal", "--in"])
            .arg(format!("x={}", input.display()))
            .env_remove("NODEVICE_SELECT")
            .env_remove("MESA_VK_DEVICE_SELECT");
        match runtime_dir {
            None => command.env_remove("XDG_RUNTIME_DIR"),
            Some(dir) => command.env("XDG_RUNTIME_DIR", dir),
        };
        let out = command.output().expect("run rfx");
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() && stderr.contains("no wgpu adapter") && !required {
            eprintln!("skipped: no wgpu adapter ({})", stderr.trim());
            return;
        }
        assert!(out.status.success(), "XDG_RUNTIME_DIR {runtime_dir:?}: {stderr}");
        assert_eq!(stderr, "", "XDG_RUNTIME_DIR {runtime_dir:?}: stderr not empty");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "out: f32[3] = [1.0, 3.0, 5.0]\n",
            "XDG_RUNTIME_DIR {runtime_dir:?}"
        );
    }
}
