//! expf for the wasm32 build, bit-identical to the one the native library
//! calls. Natively, LLVM lowers `@exp` on f32 to a call of `expf`; Deno
//! links libm, so glibc's wins the symbol lookup over the copy in Zig's
//! compiler_rt. glibc's `expf` (since 2.27) is Arm's optimized-routines
//! algorithm: 32-entry table of 2^(i/32), degree-3 polynomial, all in f64,
//! rounded once to f32. compiler_rt's (the one a wasm build would get) is
//! the older FreeBSD/musl algorithm and differs in the last bit for many
//! inputs, so the wasm build uses this port instead (same constants as
//! musl's src/math/expf.c and exp2f_data.c, which are that code too).
//!
//! glibc on x86-64 runs an FMA-compiled copy where the CPU has FMA (an
//! ifunc), in which GCC fused four operations: `z + shift` and `z - kd`
//! with the product `z = invln2 * x` (it has no other use), and the two
//! polynomial steps. This port fuses the same four (`@mulAdd`; wasm has no
//! fma instruction, so compiler_rt's exact software fma runs). Checked once
//! over all 2^32 inputs against glibc 2.36 on an AVX-512 CPU: 0 differences;
//! without the fusions, 2 inputs differ (that is also what a CPU without
//! FMA, on glibc's plain copy, would see against this port). The test below
//! samples every 97th input so that `zig build test` stays quick.

const std = @import("std");
const builtin = @import("builtin");

const table_bits = 5;
const n_table = 1 << table_bits;
/// tab[i] = asuint64(2^(i/32)) - (i << 47).
const tab = [n_table]u64{
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
    0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
    0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
    0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
    0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
    0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
};
const nf: f64 = n_table;
const shift: f64 = 0x1.8p+52;
const invln2_scaled: f64 = 0x1.71547652b82fep+0 * nf;
const c0: f64 = 0x1.c6af84b912394p-5 / nf / nf / nf;
const c1: f64 = 0x1.ebfce50fac4f3p-3 / nf / nf;
const c2: f64 = 0x1.62e42ff0c52d6p-1 / nf;

fn top12(x: f32) u32 {
    return @as(u32, @bitCast(x)) >> 20;
}

/// e^x rounded to f32, as glibc's expf computes it (round to nearest).
pub fn expf(x: f32) f32 {
    const abstop = top12(x) & 0x7ff;
    if (abstop >= comptime top12(88.0)) {
        // |x| >= 88 or x is NaN.
        if (@as(u32, @bitCast(x)) == @as(u32, @bitCast(-std.math.inf(f32)))) return 0.0;
        if (abstop >= comptime top12(std.math.inf(f32))) return x + x;
        if (x > 0x1.62e42ep6) return std.math.inf(f32); // overflow
        if (x < -0x1.9fe368p6) return 0.0; // underflow
    }
    const xd: f64 = x;
    // x * 32 / ln2 = k + r, r in [-1/2, 1/2], k rounded to nearest even.
    var kd = @mulAdd(f64, invln2_scaled, xd, shift);
    const ki: u64 = @bitCast(kd);
    kd -= shift;
    const r = @mulAdd(f64, invln2_scaled, xd, -kd);
    // e^x = 2^(k/32) * 2^(r/32) ~= s * (c0 r^3 + c1 r^2 + c2 r + 1)
    const t = tab[@intCast(ki % n_table)] +% (ki << (52 - table_bits));
    const s: f64 = @bitCast(t);
    const p = @mulAdd(f64, c0, r, c1);
    const r2 = r * r;
    var y = @mulAdd(f64, c2, r, 1.0);
    y = @mulAdd(f64, p, r2, y);
    y = y * s;
    return @floatCast(y);
}

/// `expf` on every lane of a vector, the same operations lane by lane (so
/// bit for bit `expf`, and glibc's FMA build): the x86 SIMD variants call it
/// instead of one libm call per lane (perf: glibc's expf took 6% of a
/// Qwen2.5-Coder-1.5B prefill, through SiLU). Lanes at |x| >= 88 or NaN,
/// rare in SiLU and GELU, go through the scalar function.
pub inline fn expfVec(comptime N: usize, x: @Vector(N, f32)) @Vector(N, f32) {
    const VD = @Vector(N, f64);
    const VQ = @Vector(N, u64);
    const top: @Vector(N, u32) = @as(@Vector(N, u32), @bitCast(x)) >> @splat(20);
    const special = (top & @as(@Vector(N, u32), @splat(0x7ff))) >= @as(@Vector(N, u32), @splat(comptime top12(88.0)));
    const xd: VD = @floatCast(x);
    var kd = @mulAdd(VD, @splat(invln2_scaled), xd, @splat(shift));
    const ki: VQ = @bitCast(kd);
    kd -= @as(VD, @splat(shift));
    const r = @mulAdd(VD, @splat(invln2_scaled), xd, -kd);
    const idx = ki & @as(VQ, @splat(n_table - 1));
    var tv: VQ = undefined;
    inline for (0..N) |i| tv[i] = tab[@intCast(idx[i])];
    const t = tv +% (ki << @splat(52 - table_bits));
    const s: VD = @bitCast(t);
    const p = @mulAdd(VD, @splat(c0), r, @splat(c1));
    const r2 = r * r;
    var y = @mulAdd(VD, @splat(c2), r, @splat(1.0));
    y = @mulAdd(VD, p, r2, y);
    y = y * s;
    var out: @Vector(N, f32) = @floatCast(y);
    if (@reduce(.Or, special)) {
        inline for (0..N) |i| {
            if (special[i]) out[i] = expf(x[i]);
        }
    }
    return out;
}

test "expfVec equals expf lane by lane on a sample of every f32" {
    const step: u64 = if (builtin.mode == .Debug) 99991 else 997;
    var i: u64 = 0;
    while (i < (1 << 32)) : (i += step * 8) {
        var x: @Vector(8, f32) = undefined;
        inline for (0..8) |l| x[l] = @bitCast(@as(u32, @truncate(i + l * step)));
        const got = expfVec(8, x);
        inline for (0..8) |l| {
            const want = expf(x[l]);
            if (std.math.isNan(want)) {
                try std.testing.expect(std.math.isNan(got[l]));
            } else {
                try std.testing.expectEqual(@as(u32, @bitCast(want)), @as(u32, @bitCast(got[l])));
            }
        }
    }
    // The edges of the special cases, and a 16-lane vector.
    const edges = [16]f32{ 88.0, -88.0, 0x1.62e42ep6, 0x1.62e430p6, -0x1.9fe368p6, -0x1.9fe36ap6, std.math.inf(f32), -std.math.inf(f32), std.math.nan(f32), 0.0, -0.0, 1e-40, -1e-40, 87.99, -87.99, -103.97 };
    const got = expfVec(16, edges);
    for (edges, 0..) |e, l| {
        const want = expf(e);
        if (std.math.isNan(want)) try std.testing.expect(std.math.isNan(got[l])) else try std.testing.expectEqual(@as(u32, @bitCast(want)), @as(u32, @bitCast(got[l])));
    }
}

test "expf equals glibc's on a sample of every f32" {
    if (builtin.os.tag != .linux or !builtin.link_libc) return error.SkipZigTest;
    var lib = std.DynLib.open("libm.so.6") catch return error.SkipZigTest;
    defer lib.close();
    const glibc = lib.lookup(*const fn (f32) callconv(.c) f32, "expf") orelse return error.SkipZigTest;
    const step: u64 = if (builtin.mode == .Debug) 9973 else 97;
    var i: u64 = 0;
    while (i < (1 << 32)) : (i += step) {
        const x: f32 = @bitCast(@as(u32, @intCast(i)));
        const want = glibc(x);
        const got = expf(x);
        if (std.math.isNan(want)) {
            try std.testing.expect(std.math.isNan(got));
            continue;
        }
        try std.testing.expectEqual(@as(u32, @bitCast(want)), @as(u32, @bitCast(got)));
    }
}
