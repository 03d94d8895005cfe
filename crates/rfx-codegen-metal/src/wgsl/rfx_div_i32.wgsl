// Floor division (NumPy //); x / 0 = 0; i32::MIN / -1 wraps.
fn rfx_div_i32(a: i32, b: i32) -> i32 {
    if (b == 0) {
        return 0;
    }
    if (b == -1) {
        return bitcast<i32>(0u - bitcast<u32>(a));
    }
    let q = a / b;
    let r = a - q * b;
    return select(q, q - 1, r != 0 && ((r < 0) != (b < 0)));
}
