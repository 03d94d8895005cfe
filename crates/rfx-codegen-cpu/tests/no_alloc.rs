//! The real-time path: once compiled and warmed up, a call allocates nothing, with or without
//! program loops (counted by a global allocator that counts every allocation of this test
//! binary).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use rfx_codegen_cpu::CpuBackend;
use rfx_ir::hir;
use rfx_ir::{Array, ArrayView, ArrayViewMut, Shape};
use rfx_lower::{Backend, LowerConfig, Scratch, lower};
use rfx_opt::{OptConfig, optimize};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged, only counting calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller upholds `GlobalAlloc::dealloc`'s contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn a_warm_call_allocates_nothing() {
    // A PID step with several outputs, a reduction and temporaries in the arena.
    let kernel = hir::parse(
        "kernel pid {
           %e = input e : f32[8]
           %i = input i : f32[8]
           %d = input d : f32[8]
           %kp = const 1.2 : f32[]
           %ki = const 0.3 : f32[]
           %kd = const 0.05 : f32[]
           %lo = const -1.0 : f32[]
           %hi = const 1.0 : f32[]
           %a = mul %kp, %e : f32[8]
           %b = mul %ki, %i : f32[8]
           %c = mul %kd, %d : f32[8]
           %s = add %a, %b : f32[8]
           %t = add %s, %c : f32[8]
           %u = clamp %t, %lo, %hi : f32[8]
           %q = mul %u, %u : f32[8]
           %n = sum %q axes [0] : f32[]
           %r = div %u, %n : f32[8]
           output u = %u
           output r = %r
         }",
    )
    .expect("kernel");
    let (mir, _) = optimize(&kernel, &OptConfig::default()).expect("optimize");
    let lir = lower(&mir, &LowerConfig::default()).expect("lower").0;
    assert!(lir.kernels().len() > 1, "the test wants temporaries:\n{lir}");
    let compiled = CpuBackend.compile(&lir, &Default::default()).expect("compile");
    let shape = Shape::new([8]);
    let e: Vec<f32> = (0..8).map(|k| 0.3 * k as f32 - 1.0).collect();
    let i: Vec<f32> = (0..8).map(|k| 0.1 * k as f32).collect();
    let d: Vec<f32> = (0..8).map(|k| 0.7 - 0.2 * k as f32).collect();
    let mut u = vec![0.0f32; 8];
    let mut r = vec![0.0f32; 8];
    let inputs = [
        ArrayView::new(&shape, &e).unwrap(),
        ArrayView::new(&shape, &i).unwrap(),
        ArrayView::new(&shape, &d).unwrap(),
    ];
    let mut scratch = Scratch::new();
    {
        let mut outputs = [
            ArrayViewMut::new(&shape, &mut u).unwrap(),
            ArrayViewMut::new(&shape, &mut r).unwrap(),
        ];
        compiled.run(&inputs, &mut outputs, &mut scratch).unwrap();
    }
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    for _ in 0..1000 {
        let mut outputs = [
            ArrayViewMut::new(&shape, &mut u).unwrap(),
            ArrayViewMut::new(&shape, &mut r).unwrap(),
        ];
        compiled.run(&inputs, &mut outputs, &mut scratch).unwrap();
    }
    let after = ALLOCATIONS.load(Ordering::SeqCst);
    assert_eq!(after - before, 0, "allocations in 1000 warm calls");
    // The real-time path on arguments made once: no allocation either.
    let mut args = rfx_lower::CallArgs::new(compiled.as_ref());
    for (k, view) in inputs.iter().enumerate() {
        args.set_input(k, *view).unwrap();
    }
    compiled.run_args(&mut args, &mut scratch).unwrap();
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    for _ in 0..1000 {
        args.input_mut::<f32>(0).unwrap()[3] += 0.0;
        compiled.run_args(&mut args, &mut scratch).unwrap();
    }
    let after = ALLOCATIONS.load(Ordering::SeqCst);
    assert_eq!(after - before, 0, "allocations in 1000 warm run_args calls");
    assert_eq!(args.output::<f32>(0), Some(&u[..]));
    assert_eq!(args.output::<f32>(1), Some(&r[..]));
    // And the results are right.
    let expected = rfx_ir::interp::run_lir(&lir, &inputs, rfx_ir::interp::Mode::Native).expect("interp");
    assert_eq!(expected[0], Array::from_slice(&u));
    assert_eq!(expected[1], Array::from_slice(&r));
    // A sum split in parts of its leaf tree on two threads (the value and gradient of sum(x²),
    // 20,000 points with a low split threshold): its parts and their merge allocate nothing.
    let n = 20_000;
    let kernel = hir::parse(&format!(
        "kernel vg {{\n  %x = input x : f32[{n}]\n  %two = const 2.0 : f32[]\n  %sq = mul %x, %x : f32[{n}]\n  \
         %loss = sum %sq axes [0] : f32[]\n  %grad = mul %two, %x : f32[{n}]\n  output loss = %loss\n  \
         output grad = %grad\n}}\n"
    ))
    .expect("kernel");
    let (mir, _) = optimize(&kernel, &OptConfig::default()).expect("optimize");
    let config = LowerConfig {
        min_elems_per_thread: 128,
        ..LowerConfig::default()
    };
    let lir = lower(&mir, &config).expect("lower").0;
    let options = rfx_lower::CompileOptions {
        max_threads: Some(2),
        ..Default::default()
    };
    let compiled = CpuBackend.compile(&lir, &options).expect("compile");
    let (shape, scalar) = (Shape::new([n]), Shape::new([]));
    let x: Vec<f32> = (0..n).map(|k| (k % 7) as f32 * 0.25 - 0.5).collect();
    let (mut loss, mut grad) = (vec![0.0f32; 1], vec![0.0f32; n]);
    let inputs = [ArrayView::new(&shape, &x).unwrap()];
    let mut call = |scratch: &mut Scratch| {
        let mut outputs = [
            ArrayViewMut::new(&scalar, &mut loss).unwrap(),
            ArrayViewMut::new(&shape, &mut grad).unwrap(),
        ];
        compiled.run(&inputs, &mut outputs, scratch).unwrap();
    };
    // Warm: the first split call starts the pool's workers, whose start-up (on their own
    // threads) allocates; a worker has picked up a job once it has run one.
    for _ in 0..20 {
        call(&mut scratch);
    }
    std::thread::sleep(std::time::Duration::from_millis(20));
    call(&mut scratch);
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    for _ in 0..100 {
        call(&mut scratch);
    }
    let after = ALLOCATIONS.load(Ordering::SeqCst);
    assert_eq!(after - before, 0, "allocations in 100 warm calls of a split sum");
    let expected = rfx_ir::interp::run_lir(&lir, &inputs, rfx_ir::interp::Mode::Native).expect("interp");
    let loss = Array::new(scalar, rfx_ir::ArrayData::F32(loss)).expect("loss");
    assert_eq!(expected[0], loss, "the interpreter's bits");
    assert_eq!(expected[1], Array::from_slice(&grad));
    // A program with a loop, as one function (4 elements) and from its plan of steps over one
    // function per kernel (1500): no allocation either, however many trips.
    for n in [4usize, 1500] {
        let compiled = CpuBackend
            .compile(&halving_loop(n), &Default::default())
            .expect("compile");
        let shape = Shape::new([n]);
        let x: Vec<f64> = (0..n).map(|k| k as f64 - 2.0).collect();
        let mut y = vec![0.0f64; n];
        let inputs = [ArrayView::new(&shape, &x).unwrap()];
        let mut call = |scratch: &mut Scratch| {
            let mut outputs = [ArrayViewMut::new(&shape, &mut y).unwrap()];
            compiled.run(&inputs, &mut outputs, scratch).unwrap();
        };
        call(&mut scratch);
        let before = ALLOCATIONS.load(Ordering::SeqCst);
        for _ in 0..100 {
            call(&mut scratch);
        }
        let after = ALLOCATIONS.load(Ordering::SeqCst);
        assert_eq!(
            after - before,
            0,
            "allocations in 100 warm calls of a loop of {n} elements"
        );
        let want: Vec<f64> = x.iter().map(|&c| (0..50).fold(c, |c, _| c * 0.5 + 1.0)).collect();
        assert_eq!(y, want);
    }
}

/// `y = f^50(x)`, `f(c) = c * 0.5 + 1`, on `n` f64 elements: kernels `x -> C`, `C * 0.5 + 1 -> T`,
/// `T -> C`, `C -> y`, the middle two looping 50 times.
fn halving_loop(n: usize) -> rfx_ir::lir::LirProgram {
    let head = |name: &str| {
        format!("  kernel {name} dims [{n}] reduce 0 vector 2 thread_min 32768 tile 1024 lanes 1 {{\n")
    };
    let copy = |name: &str, from: usize, to: usize| {
        format!(
            "{}    slots [f64]\n    preamble {{ }}\n    body {{\n      s0 = load buf{from} [1]\n      \
             store buf{to} [1] = s0\n    }}\n  }}\n",
            head(name)
        )
    };
    let text = format!(
        "lir halving arena {} align 64 {{\n  buf0: f64[{n}] = input x\n  buf1: f64[{n}] = output y\n  \
         buf2: f64[{n}] = arena 0\n  buf3: f64[{n}] = arena {}\n{}{}    slots [f64, f64, f64, f64, f64]\n    \
         preamble {{\n      s1 = const 0.5\n      s3 = const 1.0\n    }}\n    body {{\n      s0 = load buf2 [1]\n      \
         s2 = mul s0, s1\n      s4 = add s2, s3\n      store buf3 [1] = s4\n    }}\n  }}\n{}{}}}\n",
        16 * n,
        8 * n,
        copy("enter", 0, 2),
        head("step"),
        copy("carry", 3, 2),
        copy("leave", 2, 1),
    );
    let loops = vec![rfx_ir::repeat::KernelLoop {
        first: 1,
        end: 3,
        trips: 50,
        exit: None,
    }];
    rfx_ir::lir::parse(&text).expect("LIR text").with_loops(loops)
}
