//! The integration tests of `rfx-codegen-cpu` in one test binary (one link instead of one per file);
//! each file is a module of it. `no_alloc.rs` (a counting global allocator), `pool_stress.rs` (the worker pool under load, alone in its process) and `filetests.rs` (its snapshots are named after its binary) stay binaries of their own.

mod common;

#[path = "assembled.rs"]
mod assembled;
#[path = "assembled_reductions.rs"]
mod assembled_reductions;
#[path = "call_args.rs"]
mod call_args;
#[path = "conformance.rs"]
mod conformance;
#[path = "cpu_target.rs"]
mod cpu_target;
#[path = "differential.rs"]
mod differential;
#[path = "emission_order.rs"]
mod emission_order;
#[path = "fast_math.rs"]
mod fast_math;
#[path = "fused.rs"]
mod fused;
#[path = "huge_arguments.rs"]
mod huge_arguments;
#[path = "joined_stores.rs"]
mod joined_stores;
#[path = "known_selects.rs"]
mod known_selects;
#[path = "large_kernels.rs"]
mod large_kernels;
#[path = "long_reductions.rs"]
mod long_reductions;
#[path = "mid_end.rs"]
mod mid_end;
#[path = "min_max_const.rs"]
mod min_max_const;
#[path = "one_element.rs"]
mod one_element;
#[path = "one_function.rs"]
mod one_function;
#[path = "program_loops.rs"]
mod program_loops;
#[path = "region_stores.rs"]
mod region_stores;
#[path = "scans.rs"]
mod scans;
#[path = "select_arms.rs"]
mod select_arms;
#[path = "short_tiles.rs"]
mod short_tiles;
#[path = "spill_slots.rs"]
mod spill_slots;
#[path = "staging_lines.rs"]
mod staging_lines;
#[path = "straight_rows.rs"]
mod straight_rows;
#[path = "strided_pairs.rs"]
mod strided_pairs;
#[path = "thread_count_bits.rs"]
mod thread_count_bits;
#[path = "tiled.rs"]
mod tiled;
#[path = "transposed_rows.rs"]
mod transposed_rows;
#[path = "windows.rs"]
mod windows;
