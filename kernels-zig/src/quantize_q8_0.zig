//! Activation quantization to Q8_0 (`quantizeQ8_0`, byte-identical to the
//! scalar reference on every variant) and the NaN-free float maxima it and
//! the attention kernels use. Compiled once per variant with kernels.zig
//! (the same module).

const std = @import("std");
const abi = @import("abi.zig");
const kernels = @import("kernels.zig");

const assert = std.debug.assert;
const qk = abi.qk;
const BlockQ8_0 = abi.BlockQ8_0;
const variant = kernels.variant;
const isa = kernels.isa;
const lanes = kernels.lanes;
const scalar = kernels.scalar;
const roundEven = kernels.roundEven;

pub extern fn @"llvm.x86.avx.max.ps.256"(@Vector(8, f32), @Vector(8, f32)) @Vector(8, f32);
pub extern fn @"llvm.x86.sse.max.ps"(@Vector(4, f32), @Vector(4, f32)) @Vector(4, f32);
pub extern fn @"llvm.x86.avx2.packssdw"(@Vector(8, i32), @Vector(8, i32)) @Vector(16, i16);
pub extern fn @"llvm.x86.avx2.packsswb"(@Vector(16, i16), @Vector(16, i16)) @Vector(32, i8);
pub extern fn @"llvm.x86.avx512.max.ps.512"(@Vector(16, f32), @Vector(16, f32), i32) @Vector(16, f32);

/// max(a, b) lane by lane for lanes that are not NaN: `vmaxps` on x86,
/// where `@max` adds a compare and a blend for NaN that cannot occur here.
pub inline fn maxNoNan(comptime N: usize, a: @Vector(N, f32), b: @Vector(N, f32)) @Vector(N, f32) {
    if (isa == .scalar or isa == .neon or N % 4 != 0) return @max(a, b);
    if (N == 4) return @"llvm.x86.sse.max.ps"(a, b);
    if (N == 8) return @"llvm.x86.avx.max.ps.256"(a, b);
    if (N == 16 and isa == .avx512) return @"llvm.x86.avx512.max.ps.512"(a, b, 4); // 4: the current rounding
    const H = N / 2;
    const lo = maxNoNan(H, @shuffle(f32, a, undefined, iota(H, 0)), @shuffle(f32, b, undefined, iota(H, 0)));
    const hi = maxNoNan(H, @shuffle(f32, a, undefined, iota(H, H)), @shuffle(f32, b, undefined, iota(H, H)));
    return @shuffle(f32, lo, hi, iota2(H));
}

/// The largest lane of v, whose lanes are not NaN: a tree of `vmaxps` on
/// x86 (the halves, then within 128 bits), where `@reduce(.Max)` is a
/// serial chain of max, compare and blend per lane; Q8_0 activation
/// quantization spent most of its time there (~60 cycles a block on Zen 4).
/// The maximum does not depend on the order it is taken in.
pub inline fn maxLaneNoNan(comptime N: usize, v: @Vector(N, f32)) f32 {
    if (isa == .scalar or isa == .neon or N < 4 or N % 4 != 0) return @reduce(.Max, v);
    if (N > 4) {
        const H = N / 2;
        return maxLaneNoNan(H, maxNoNan(H, @shuffle(f32, v, undefined, iota(H, 0)), @shuffle(f32, v, undefined, iota(H, H))));
    }
    const m = maxNoNan(4, v, @shuffle(f32, v, undefined, [4]i32{ 2, 3, 0, 1 }));
    return maxNoNan(4, m, @shuffle(f32, m, undefined, [4]i32{ 1, 0, 3, 2 }))[0];
}

/// [from, from + n) as shuffle indices.
fn iota(comptime n: usize, comptime from: usize) [n]i32 {
    var r: [n]i32 = undefined;
    for (0..n) |i| r[i] = @intCast(from + i);
    return r;
}

/// Indices joining two n-lane vectors: a's lanes, then b's (~i).
fn iota2(comptime n: usize) [2 * n]i32 {
    var r: [2 * n]i32 = undefined;
    for (0..n) |i| {
        r[i] = @intCast(i);
        r[n + i] = ~@as(i32, @intCast(i));
    }
    return r;
}

/// Quantizes x (a multiple of 32 long) to Q8_0 blocks, byte-identical to the
/// scalar reference on every variant. Returns false if x holds a non-finite
/// value (out is then unspecified).
pub fn quantizeQ8_0(x: []const f32, out: []BlockQ8_0) bool {
    assert(x.len == out.len * qk);
    if (variant == .scalar) {
        for (out, 0..) |*o, b| {
            if (!scalar.quantizeBlockQ8_0(x[b * qk ..][0..qk], o)) return false;
        }
        return true;
    }
    const V = @Vector(lanes, f32);
    for (out, 0..) |*o, b| {
        const xb = x[b * qk ..][0..qk];
        var amax: V = @splat(0);
        var finite = true;
        inline for (0..qk / lanes) |k| {
            const v: V = xb[k * lanes ..][0..lanes].*;
            // |NaN| <= max and |inf| <= max are both false.
            finite = finite and @reduce(.And, @abs(v) <= @as(V, @splat(std.math.floatMax(f32))));
            amax = maxNoNan(lanes, amax, @abs(v));
        }
        if (!finite) return false;
        const mx = maxLaneNoNan(lanes, amax);
        const d = mx / 127.0;
        const id: f32 = if (mx != 0) 127.0 / mx else 0;
        o.d = abi.f32ToF16(d);
        var qi: [qk / lanes]@Vector(lanes, i32) = undefined;
        inline for (0..qk / lanes) |k| {
            const v: V = xb[k * lanes ..][0..lanes].*;
            const p = v * @as(V, @splat(id));
            const in_range = @abs(p) <= @as(V, @splat(std.math.floatMax(f32)));
            const r = @select(f32, in_range, roundEven(p), @as(V, @splat(0)));
            const c = @min(@max(r, @as(V, @splat(-127.0))), @as(V, @splat(127.0)));
            qi[k] = @intFromFloat(c);
        }
        if (isa == .avx2) {
            // The four vectors' 32 quants (all in [-127, 127], so the packs
            // never saturate) in one store: two `vpackssdw`, a `vpacksswb`
            // (128-bit lanes interleaved: dwords a0 b0 c0 d0 a1 b1 c1 d1,
            // each 4 quants) and one `vpermd` back to a0 a1 b0 b1 ...,
            // instead of a pack chain and an 8-byte store per vector.
            const ab = @"llvm.x86.avx2.packssdw"(qi[0], qi[1]);
            const cd = @"llvm.x86.avx2.packssdw"(qi[2], qi[3]);
            const all: @Vector(8, i32) = @bitCast(@"llvm.x86.avx2.packsswb"(ab, cd));
            o.qs = @bitCast(@shuffle(i32, all, undefined, [8]i32{ 0, 4, 1, 5, 2, 6, 3, 7 }));
        } else {
            inline for (0..qk / lanes) |k| o.qs[k * lanes ..][0..lanes].* = @as(@Vector(lanes, i8), @intCast(qi[k]));
        }
    }
    return true;
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

const testing = std.testing;

test "quantizeQ8_0 is byte-identical to the scalar reference" {
    var prng = std.Random.DefaultPrng.init(42);
    const rng = prng.random();
    var x: [32 * 9]f32 = undefined;
    for (&x, 0..) |*v, i| v.* = (rng.floatNorm(f32)) * @as(f32, @floatFromInt(i % 7 + 1));
    @memset(x[64..96], 0); // an all-zero block
    var a: [9]BlockQ8_0 = undefined;
    var b: [9]BlockQ8_0 = undefined;
    try testing.expect(quantizeQ8_0(&x, &a));
    for (&b, 0..) |*o, i| try testing.expect(scalar.quantizeBlockQ8_0(x[i * 32 ..][0..32], o));
    try testing.expectEqualSlices(u8, std.mem.asBytes(&b), std.mem.asBytes(&a));
    // Tiny blocks: 1/d overflows, every quant is 0 on every variant.
    for (x[32..64], 0..) |*v, i| v.* = if (i % 2 == 0) 1e-39 else -3e-38;
    try testing.expect(quantizeQ8_0(&x, &a));
    for (&b, 0..) |*o, i| try testing.expect(scalar.quantizeBlockQ8_0(x[i * 32 ..][0..32], o));
    try testing.expectEqualSlices(u8, std.mem.asBytes(&b), std.mem.asBytes(&a));
    // The largest magnitude in each of the 32 positions in turn, of either
    // sign (the lane tree and the packs' order).
    var y: [32 * 32]f32 = undefined;
    for (&y, 0..) |*v, i| v.* = @as(f32, @floatFromInt(@as(i32, @intCast(i % 32)) - 16)) * 0.25 + 0.125;
    for (0..32) |blk| y[blk * 32 + blk] = if (blk % 2 == 0) 9.5 else -9.5;
    var ya: [32]BlockQ8_0 = undefined;
    var yb: [32]BlockQ8_0 = undefined;
    try testing.expect(quantizeQ8_0(&y, &ya));
    for (&yb, 0..) |*o, i| try testing.expect(scalar.quantizeBlockQ8_0(y[i * 32 ..][0..32], o));
    try testing.expectEqualSlices(u8, std.mem.asBytes(&yb), std.mem.asBytes(&ya));
    x[100] = std.math.nan(f32);
    try testing.expect(!quantizeQ8_0(&x, &a));
    x[100] = std.math.inf(f32);
    try testing.expect(!quantizeQ8_0(&x, &a));
}
