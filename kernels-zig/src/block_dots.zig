//! The integer block dot products of Q4_0 and Q8_0 weight blocks with Q8_0
//! activation blocks (`kernels.zig`): the lane functions of each variant
//! (`lanesQ4_0x2`, `lanesQ8_0x1Avx2`, `dot4`, ...) over the LLVM
//! intrinsics they call, the per-block integer dots (`blockDotsQ4_0`,
//! `blockDotsQ8_0`), the row dots scaled and summed in f32 (`dotQ4_0`,
//! `dotQ8_0`) and the matvec rows (`matvecRowsQ4_0`, `matvecRowsQ8_0`),
//! with their tests against kernels.zig's `scalar` reference. kernels.zig
//! re-exports what is public here.
//!
//! Compiled once per variant with `kernels.zig` (the same module).

const std = @import("std");
const abi = @import("abi.zig");
const kernels = @import("kernels.zig");

const assert = std.debug.assert;
const qk = abi.qk;
const BlockQ8_0 = abi.BlockQ8_0;
const BlockQ4_0 = abi.BlockQ4_0;
const variant = kernels.variant;
const isa = kernels.isa;
const scalar = kernels.scalar;

const V16i32 = @Vector(16, i32);
const V8i32 = @Vector(8, i32);
const V16i16 = @Vector(16, i16);

pub extern fn @"llvm.x86.avx512.vpdpbusd.512"(V16i32, V16i32, V16i32) V16i32;
pub extern fn @"llvm.x86.avx512.vpdpbusd.256"(V8i32, V8i32, V8i32) V8i32;
pub extern fn @"llvm.x86.avx2.pmadd.ub.sw"(@Vector(32, u8), @Vector(32, i8)) V16i16;
pub extern fn @"llvm.x86.avx2.pmadd.wd"(V16i16, V16i16) V8i32;
pub extern fn @"llvm.x86.avx2.psign.b"(@Vector(32, i8), @Vector(32, i8)) @Vector(32, i8);

/// sum((w - 2^shift) * x) over each 4-byte lane with VNNI, for unsigned
/// weight bytes `w` (Q4_0 nibbles, shift 3; Q8_0 `w XOR 0x80`, shift 7):
/// `vpdpbusd` of w and of ones against x, on zmm for 16 lanes and ymm for 8.
/// Exact for every byte value.
inline fn vnniCorrected(comptime n: usize, comptime shift: u5, w: @Vector(4 * n, u8), x: @Vector(4 * n, i8)) @Vector(n, i32) {
    const zero: @Vector(n, i32) = @splat(0);
    const ones: @Vector(4 * n, u8) = @splat(1);
    const dpbusd = switch (n) {
        16 => @"llvm.x86.avx512.vpdpbusd.512",
        8 => @"llvm.x86.avx512.vpdpbusd.256",
        else => @compileError("vnniCorrected: 8 or 16 lanes"),
    };
    const wx = dpbusd(zero, @bitCast(w), @bitCast(x));
    const sx = dpbusd(zero, @bitCast(ones), @bitCast(x));
    return wx - (sx << @splat(shift));
}

/// A Q4_0 block's 32 nibbles as bytes: the low nibbles (columns 0..15), then the high ones.
inline fn nibbles(w: *const [16]u8) @Vector(32, u8) {
    const q: @Vector(16, u8) = w.*;
    return std.simd.join(q & @as(@Vector(16, u8), @splat(0x0f)), q >> @as(@Vector(16, u3), @splat(4)));
}

/// A Q8_0 block's bytes as unsigned: w XOR 0x80 = w + 128 as u8.
inline fn offsetBytes(w: *const [32]i8) @Vector(32, u8) {
    return @as(@Vector(32, u8), @bitCast(w.*)) ^ @as(@Vector(32, u8), @splat(0x80));
}

/// Two Q4_0 blocks against two Q8_0 blocks with VNNI. Lanes 0..7 hold
/// partial sums of block a, lanes 8..15 those of block b.
pub inline fn lanesQ4_0x2(wa: *const [16]u8, wb: *const [16]u8, xa: *const [32]i8, xb: *const [32]i8) V16i32 {
    const w: @Vector(64, u8) = std.simd.join(nibbles(wa), nibbles(wb));
    const x: @Vector(64, i8) = std.simd.join(@as(@Vector(32, i8), xa.*), @as(@Vector(32, i8), xb.*));
    // sum((q - 8) * x) = sum(q * x) - 8 * sum(x)
    return vnniCorrected(16, 3, w, x);
}

/// One Q4_0 block against one Q8_0 block with 256-bit VNNI (8 partial lanes).
pub inline fn lanesQ4_0x1Vnni(w: *const [16]u8, x: *const [32]i8) V8i32 {
    return vnniCorrected(8, 3, nibbles(w), x.*);
}

/// Two Q8_0 weight blocks against two Q8_0 activation blocks with VNNI.
/// vpdpbusd wants one unsigned operand: w ^ 0x80 = w + 128 as u8, so
/// sum(w * x) = sum((w + 128) * x) - 128 * sum(x), exact for every byte.
pub inline fn lanesQ8_0x2(wa: *const [32]i8, wb: *const [32]i8, xa: *const [32]i8, xb: *const [32]i8) V16i32 {
    const wav: @Vector(32, u8) = @bitCast(wa.*);
    const wbv: @Vector(32, u8) = @bitCast(wb.*);
    const w: @Vector(64, u8) = std.simd.join(wav, wbv) ^ @as(@Vector(64, u8), @splat(0x80));
    const x: @Vector(64, i8) = std.simd.join(@as(@Vector(32, i8), xa.*), @as(@Vector(32, i8), xb.*));
    return vnniCorrected(16, 7, w, x);
}

/// One Q8_0 block against one Q8_0 block with 256-bit VNNI (8 partial lanes).
pub inline fn lanesQ8_0x1Vnni(w: *const [32]i8, x: *const [32]i8) V8i32 {
    return vnniCorrected(8, 7, offsetBytes(w), x.*);
}

/// AVX2: one Q4_0 block. vpmaddubsw(q, x) pairs stay within i16
/// (|2 * 15 * 128| < 2^15), and so does the 8 * sum(x) correction.
pub inline fn lanesQ4_0x1Avx2(w: *const [16]u8, x: *const [32]i8) V8i32 {
    const wv = nibbles(w);
    const xv: @Vector(32, i8) = x.*;
    const wx = @"llvm.x86.avx2.pmadd.ub.sw"(wv, xv);
    const sx = @"llvm.x86.avx2.pmadd.ub.sw"(@splat(8), xv);
    return @"llvm.x86.avx2.pmadd.wd"(wx - sx, @splat(1));
}

/// AVX2: one Q8_0 block, widened to i16 so that every byte value is exact.
pub inline fn lanesQ8_0x1Avx2(w: *const [32]i8, x: *const [32]i8) V8i32 {
    const wv: @Vector(32, i8) = w.*;
    const xv: @Vector(32, i8) = x.*;
    const w16: @Vector(32, i16) = wv;
    const x16: @Vector(32, i16) = xv;
    const w_lo: V16i16 = std.simd.extract(w16, 0, 16);
    const w_hi: V16i16 = std.simd.extract(w16, 16, 16);
    const x_lo: V16i16 = std.simd.extract(x16, 0, 16);
    const x_hi: V16i16 = std.simd.extract(x16, 16, 16);
    return @"llvm.x86.avx2.pmadd.wd"(w_lo, x_lo) + @"llvm.x86.avx2.pmadd.wd"(w_hi, x_hi);
}

pub extern fn @"llvm.aarch64.neon.sdot.v4i32.v16i8"(@Vector(4, i32), @Vector(16, i8), @Vector(16, i8)) @Vector(4, i32);

/// Lane i = sum of w[4i + k] * x[4i + k], k < 4, exact: `sdot` on the
/// dotprod variant; elsewhere i8 products widened to i16 (|p| <= 2^14) and
/// summed in i32 pairs twice (`smull`, `saddlp`, `addp` on NEON).
pub inline fn dot4(comptime N: usize, w: @Vector(4 * N, i8), x: @Vector(4 * N, i8)) @Vector(N, i32) {
    if (variant == .neon_dotprod) {
        comptime assert(N % 4 == 0);
        var out: @Vector(N, i32) = undefined;
        inline for (0..N / 4) |c| {
            const wc: @Vector(16, i8) = std.simd.extract(w, c * 16, 16);
            const xc: @Vector(16, i8) = std.simd.extract(x, c * 16, 16);
            const d = @"llvm.aarch64.neon.sdot.v4i32.v16i8"(@splat(0), wc, xc);
            inline for (0..4) |k| out[c * 4 + k] = d[k];
        }
        return out;
    }
    const a: @Vector(4 * N, i16) = w;
    const b: @Vector(4 * N, i16) = x;
    const p: @Vector(4 * N, i32) = a * b;
    const pairs = @shuffle(i32, p, undefined, std.simd.iota(i32, 2 * N) * @as(@Vector(2 * N, i32), @splat(2))) +
        @shuffle(i32, p, undefined, std.simd.iota(i32, 2 * N) * @as(@Vector(2 * N, i32), @splat(2)) + @as(@Vector(2 * N, i32), @splat(1)));
    return @shuffle(i32, pairs, undefined, std.simd.iota(i32, N) * @as(@Vector(N, i32), @splat(2))) +
        @shuffle(i32, pairs, undefined, std.simd.iota(i32, N) * @as(@Vector(N, i32), @splat(2)) + @as(@Vector(N, i32), @splat(1)));
}

/// NEON: one Q4_0 block. The nibbles minus 8 are signed bytes in [-8, 7], so
/// a signed dot needs no correction.
pub inline fn lanesQ4_0x1Neon(w: *const [16]u8, x: *const [32]i8) V8i32 {
    const wv: @Vector(32, i8) = @as(@Vector(32, i8), @bitCast(nibbles(w))) - @as(@Vector(32, i8), @splat(8));
    return dot4(8, wv, x.*);
}

/// NEON: one Q8_0 block.
pub inline fn lanesQ8_0x1Neon(w: *const [32]i8, x: *const [32]i8) V8i32 {
    return dot4(8, w.*, x.*);
}

/// Per-block integer dot products of Q4_0 (sum((q - 8) * x)) or Q8_0
/// (sum(w * x)) weight blocks with Q8_0 activation blocks.
fn blockDots(comptime W: type, w: []const W, x: []const BlockQ8_0, out: []i32) void {
    assert(w.len == x.len);
    assert(out.len == w.len);
    const L = Lanes(W);
    switch (isa) {
        .scalar => for (w, x, out) |*wb, *xb, *o| {
            o.* = if (W == BlockQ4_0) scalar.blockDotQ4_0(wb, xb) else scalar.blockDotQ8_0(wb, xb);
        },
        .avx2, .neon => for (w, x, out) |*wb, *xb, *o| {
            o.* = @reduce(.Add, L.avx2(&wb.qs, &xb.qs));
        },
        .avx512 => {
            var i: usize = 0;
            while (i + 2 <= w.len) : (i += 2) {
                const l = L.vnni2(&w[i].qs, &w[i + 1].qs, &x[i].qs, &x[i + 1].qs);
                out[i] = @reduce(.Add, std.simd.extract(l, 0, 8));
                out[i + 1] = @reduce(.Add, std.simd.extract(l, 8, 8));
            }
            if (i < w.len) out[i] = @reduce(.Add, L.vnni1(&w[i].qs, &x[i].qs));
        },
    }
}

/// Per-block integer dot products, sum((q - 8) * x) for each block.
pub fn blockDotsQ4_0(w: []const BlockQ4_0, x: []const BlockQ8_0, out: []i32) void {
    blockDots(BlockQ4_0, w, x, out);
}

/// Per-block integer dot products, sum(w * x) for each block.
pub fn blockDotsQ8_0(w: []const BlockQ8_0, x: []const BlockQ8_0, out: []i32) void {
    blockDots(BlockQ8_0, w, x, out);
}

inline fn scalePair(wa: anytype, wb: anytype, xa: *const BlockQ8_0, xb: *const BlockQ8_0) @Vector(16, f32) {
    const sa: @Vector(8, f32) = @splat(abi.f16ToF32(wa.d) * abi.f16ToF32(xa.d));
    const sb: @Vector(8, f32) = @splat(abi.f16ToF32(wb.d) * abi.f16ToF32(xb.d));
    return std.simd.join(sa, sb);
}

inline fn scaleOne(w: anytype, x: *const BlockQ8_0) @Vector(8, f32) {
    return @splat(abi.f16ToF32(w.d) * abi.f16ToF32(x.d));
}

/// The integer lane functions of one weight block type.
fn Lanes(comptime W: type) type {
    return struct {
        /// The 8-lane functions: vpdpbusd where the variant has AVX-VNNI,
        /// sdot or widening products on NEON.
        const avx2 = if (isa == .neon)
            (if (W == BlockQ4_0) lanesQ4_0x1Neon else lanesQ8_0x1Neon)
        else if (variant == .avxvnni)
            (if (W == BlockQ4_0) lanesQ4_0x1Vnni else lanesQ8_0x1Vnni)
        else if (W == BlockQ4_0) lanesQ4_0x1Avx2 else lanesQ8_0x1Avx2;
        const vnni1 = if (W == BlockQ4_0) lanesQ4_0x1Vnni else lanesQ8_0x1Vnni;
        const vnni2 = if (W == BlockQ4_0) lanesQ4_0x2 else lanesQ8_0x2;
        const reference = if (W == BlockQ4_0) scalar.dotQ4_0 else scalar.dotQ8_0;
    };
}

/// Dot product of one quantized row (Q4_0 or Q8_0 blocks) with a Q8_0
/// activation vector: integer partial sums per block, scaled and summed in f32.
fn dotRow(comptime W: type, w: []const W, x: []const BlockQ8_0) f32 {
    assert(w.len == x.len);
    const L = Lanes(W);
    switch (isa) {
        .scalar => return L.reference(w, x),
        .avx2, .neon => {
            var acc: @Vector(8, f32) = @splat(0);
            for (w, x) |*wb, *xb| {
                const l: @Vector(8, f32) = @floatFromInt(L.avx2(&wb.qs, &xb.qs));
                acc = @mulAdd(@Vector(8, f32), l, scaleOne(wb, xb), acc);
            }
            return @reduce(.Add, acc);
        },
        .avx512 => {
            var acc: @Vector(16, f32) = @splat(0);
            var i: usize = 0;
            while (i + 2 <= w.len) : (i += 2) {
                const l: @Vector(16, f32) = @floatFromInt(L.vnni2(&w[i].qs, &w[i + 1].qs, &x[i].qs, &x[i + 1].qs));
                acc = @mulAdd(@Vector(16, f32), l, scalePair(&w[i], &w[i + 1], &x[i], &x[i + 1]), acc);
            }
            var total = @reduce(.Add, acc);
            if (i < w.len) {
                const l: @Vector(8, f32) = @floatFromInt(L.vnni1(&w[i].qs, &x[i].qs));
                total += @reduce(.Add, l * scaleOne(&w[i], &x[i]));
            }
            return total;
        },
    }
}

/// Dot product of one Q4_0 row with a Q8_0 activation vector.
pub fn dotQ4_0(w: []const BlockQ4_0, x: []const BlockQ8_0) f32 {
    return dotRow(BlockQ4_0, w, x);
}

/// Dot product of one Q8_0 row with a Q8_0 activation vector.
pub fn dotQ8_0(w: []const BlockQ8_0, x: []const BlockQ8_0) f32 {
    return dotRow(BlockQ8_0, w, x);
}

/// Rows [row_begin, row_end) of y = W x, W stored row-major as `blocks_per_row`
/// blocks per row. Each row is computed by the same code whatever the thread
/// split, so results are identical for every thread count.
pub fn matvecRowsQ4_0(w: []const BlockQ4_0, x: []const BlockQ8_0, y: []f32, row_begin: usize, row_end: usize) void {
    const nb = x.len;
    assert(nb > 0);
    assert(row_begin <= row_end and row_end <= y.len);
    assert(w.len >= row_end * nb);
    for (row_begin..row_end) |r| y[r] = dotQ4_0(w[r * nb ..][0..nb], x);
}

pub fn matvecRowsQ8_0(w: []const BlockQ8_0, x: []const BlockQ8_0, y: []f32, row_begin: usize, row_end: usize) void {
    const nb = x.len;
    assert(nb > 0);
    assert(row_begin <= row_end and row_end <= y.len);
    assert(w.len >= row_end * nb);
    for (row_begin..row_end) |r| y[r] = dotQ8_0(w[r * nb ..][0..nb], x);
}

// ---------------------------------------------------------------------------
// Tests: each variant against the scalar reference, on lengths hitting tails.
// ---------------------------------------------------------------------------

const testing = std.testing;
const randomQ8Blocks = kernels.randomQ8Blocks;
const randomQ4Blocks = kernels.randomQ4Blocks;
const expectCloseMag = kernels.expectCloseMag;
const absTermsQ8 = kernels.absTermsQ8;
const absTermsQ4 = kernels.absTermsQ4;

test "block dot products equal the scalar reference exactly" {
    var prng = std.Random.DefaultPrng.init(0xc0ffee);
    const rng = prng.random();
    var w8: [67]BlockQ8_0 = undefined;
    var w4: [67]BlockQ4_0 = undefined;
    var x: [67]BlockQ8_0 = undefined;
    var got: [67]i32 = undefined;
    for (0..20) |trial| {
        const full = trial % 2 == 0; // includes -128 in both operands
        randomQ8Blocks(rng, &w8, full);
        randomQ4Blocks(rng, &w4);
        randomQ8Blocks(rng, &x, full);
        for ([_]usize{ 1, 2, 3, 4, 5, 7, 8, 31, 64, 67 }) |nb| {
            blockDotsQ8_0(w8[0..nb], x[0..nb], got[0..nb]);
            for (0..nb) |b| try testing.expectEqual(scalar.blockDotQ8_0(&w8[b], &x[b]), got[b]);
            blockDotsQ4_0(w4[0..nb], x[0..nb], got[0..nb]);
            for (0..nb) |b| try testing.expectEqual(scalar.blockDotQ4_0(&w4[b], &x[b]), got[b]);
            try expectCloseMag(scalar.dotQ8_0(w8[0..nb], x[0..nb]), dotQ8_0(w8[0..nb], x[0..nb]), 1e-5, absTermsQ8(w8[0..nb], x[0..nb]));
            try expectCloseMag(scalar.dotQ4_0(w4[0..nb], x[0..nb]), dotQ4_0(w4[0..nb], x[0..nb]), 1e-5, absTermsQ4(w4[0..nb], x[0..nb]));
        }
    }
}

test "extreme bytes: every product at its bound" {
    var w: [3]BlockQ8_0 = undefined;
    var x: [3]BlockQ8_0 = undefined;
    var w4: [3]BlockQ4_0 = undefined;
    for (&w, &x, &w4) |*a, *b, *c| {
        a.d = 0x3c00;
        b.d = 0x3c00;
        c.d = 0x3c00;
        @memset(&a.qs, -128);
        @memset(&b.qs, -128);
        @memset(&c.qs, 0x00);
    }
    var got: [3]i32 = undefined;
    blockDotsQ8_0(&w, &x, &got);
    for (got) |g| try testing.expectEqual(@as(i32, 32 * 128 * 128), g);
    blockDotsQ4_0(&w4, &x, &got);
    for (got) |g| try testing.expectEqual(@as(i32, 32 * -8 * -128), g);
}
