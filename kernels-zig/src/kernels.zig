//! Kernel bodies, written once and compiled once per ISA variant.
//!
//! `variant.zig` instantiates this file once per variant of the library's
//! architecture, as separate objects, each built for its own CPU level:
//! x86-64 scalar, AVX2+FMA, AVX2+AVX-VNNI and AVX-512BW+VNNI; aarch64
//! scalar, Advanced SIMD (NEON) and NEON with SDOT (dotprod).
//! The `scalar` namespace below is the reference every SIMD path is tested
//! against: integer block dot products must match it exactly, float results
//! within a small relative error (only the summation order differs).
//!
//! Callers (the library root) have validated every length already; the
//! functions here assert their preconditions again and never allocate.

const std = @import("std");
const builtin = @import("builtin");
const abi = @import("abi.zig");
const options = @import("variant_options");

const assert = std.debug.assert;
const qk = abi.qk;
const BlockQ8_0 = abi.BlockQ8_0;
const BlockQ4_0 = abi.BlockQ4_0;

pub const Variant = abi.Variant;
pub const variant: Variant = @enumFromInt(options.variant);

/// The wasm32 build compiles the scalar variant of this file (`zig build
/// wasm`): the same float loops in the same order, so the same float
/// results; only the exact integer block dots use simd128 (`wasmDotQ*`).
const is_wasm = builtin.cpu.arch == .wasm32;

comptime {
    if (is_wasm) assert(variant == .scalar);
}

/// e^x. Natively `@exp`, which calls the process's `expf` (glibc's, under
/// Deno). In wasm `@exp` would call compiler_rt's, a different algorithm;
/// `expf.zig` is a port of glibc's, bit-identical to it. The x86 SIMD
/// variants (FMA, as glibc's x86-64 FMA build that the port equals) run the
/// port, lane-parallel on vectors (`expfVec`) instead of one libm call per
/// lane, and on single values too, so that a test binary (where `@exp`
/// resolves to compiler_rt's expf) checks what ships.
pub inline fn exp(x: anytype) @TypeOf(x) {
    const port = @import("expf.zig");
    if ((is_wasm or vec_expf) and @TypeOf(x) == f32) return port.expf(x);
    if (vec_expf and @typeInfo(@TypeOf(x)) == .vector and @typeInfo(@TypeOf(x)).vector.child == f32) {
        return port.expfVec(@typeInfo(@TypeOf(x)).vector.len, x);
    }
    return @exp(x);
}

const vec_expf = switch (variant) {
    .avx2, .avxvnni, .avx512vnni => true,
    else => false,
};

/// The vector ISA of this variant's float and row kernels: `avxvnni` is the
/// AVX2 variant with 256-bit `vpdpbusd` for its integer dot products;
/// `neon_dotprod` the NEON variant with `sdot`.
const Isa = enum { scalar, avx2, avx512, neon };
const isa: Isa = switch (variant) {
    .scalar => .scalar,
    .avx2, .avxvnni => .avx2,
    .avx512vnni => .avx512,
    .neon, .neon_dotprod => .neon,
};

/// f32 lanes used by the float kernels of this variant.
pub const lanes: usize = switch (isa) {
    .scalar => 1,
    .avx2 => 8,
    .avx512 => 16,
    .neon => 4,
};

const is_arm = builtin.cpu.arch == .aarch64;

comptime {
    const f = builtin.cpu.features;
    if (is_arm) {
        const has = std.Target.aarch64.featureSetHas;
        switch (variant) {
            .scalar => {},
            .neon => assert(has(f, .neon)),
            .neon_dotprod => assert(has(f, .neon) and has(f, .dotprod)),
            .avx2, .avxvnni, .avx512vnni => unreachable,
        }
    } else if (!is_wasm) {
        const has = std.Target.x86.featureSetHas;
        switch (variant) {
            .scalar => {},
            .avx2 => assert(has(f, .avx2) and has(f, .fma) and has(f, .f16c)),
            .avx512vnni => assert(has(f, .avx512bw) and has(f, .avx512vl) and has(f, .avx512vnni)),
            .avxvnni => assert(has(f, .avx2) and has(f, .fma) and has(f, .f16c) and has(f, .avxvnni)),
            .neon, .neon_dotprod => unreachable,
        }
    }
}

// ---------------------------------------------------------------------------
// Scalar reference. Plain loops, sequential f32 accumulation. The scalar
// variant exports exactly these.
// ---------------------------------------------------------------------------

/// Integer dot of 32 weights and 32 activations with simd128 (wasm32 only):
/// i8 x i8 products widened to i16 are exact and pairwise sums into i32
/// lanes (`i32x4.dot_i16x8_s`) are exact, so the result is the scalar loop's
/// in any order.
inline fn wasmDotQ8_0(w: *const [32]i8, x: *const [32]i8) i32 {
    const a: @Vector(32, i16) = @as(@Vector(32, i8), w.*);
    const b: @Vector(32, i16) = @as(@Vector(32, i8), x.*);
    const p: @Vector(32, i32) = @as(@Vector(32, i32), a) * @as(@Vector(32, i32), b);
    return @reduce(.Add, p);
}

inline fn wasmDotQ4_0(w: *const [16]u8, x: *const [32]i8) i32 {
    const q: @Vector(16, u8) = w.*;
    const lo: @Vector(16, i16) = @as(@Vector(16, i16), q & @as(@Vector(16, u8), @splat(15))) - @as(@Vector(16, i16), @splat(8));
    const hi: @Vector(16, i16) = @as(@Vector(16, i16), q >> @splat(4)) - @as(@Vector(16, i16), @splat(8));
    const xv: @Vector(32, i8) = x.*;
    const xl: @Vector(16, i16) = std.simd.extract(xv, 0, 16);
    const xh: @Vector(16, i16) = std.simd.extract(xv, 16, 16);
    const p = @as(@Vector(16, i32), lo) * @as(@Vector(16, i32), xl) + @as(@Vector(16, i32), hi) * @as(@Vector(16, i32), xh);
    return @reduce(.Add, p);
}

pub const scalar = struct {
    pub fn blockDotQ8_0(w: *const BlockQ8_0, x: *const BlockQ8_0) i32 {
        if (is_wasm) return wasmDotQ8_0(&w.qs, &x.qs);
        var sum: i32 = 0;
        for (0..qk) |j| sum += @as(i32, w.qs[j]) * @as(i32, x.qs[j]);
        return sum;
    }

    pub fn blockDotQ4_0(w: *const BlockQ4_0, x: *const BlockQ8_0) i32 {
        if (is_wasm) return wasmDotQ4_0(&w.qs, &x.qs);
        var sum: i32 = 0;
        for (0..qk / 2) |j| {
            const lo: i32 = @as(i32, w.qs[j] & 0x0f) - 8;
            const hi: i32 = @as(i32, w.qs[j] >> 4) - 8;
            sum += lo * @as(i32, x.qs[j]) + hi * @as(i32, x.qs[j + qk / 2]);
        }
        return sum;
    }

    pub fn dotQ8_0(w: []const BlockQ8_0, x: []const BlockQ8_0) f32 {
        assert(w.len == x.len);
        var acc: f32 = 0;
        for (w, x) |*wb, *xb| {
            const scale = abi.f16ToF32(wb.d) * abi.f16ToF32(xb.d);
            acc += @as(f32, @floatFromInt(blockDotQ8_0(wb, xb))) * scale;
        }
        return acc;
    }

    pub fn dotQ4_0(w: []const BlockQ4_0, x: []const BlockQ8_0) f32 {
        assert(w.len == x.len);
        var acc: f32 = 0;
        for (w, x) |*wb, *xb| {
            const scale = abi.f16ToF32(wb.d) * abi.f16ToF32(xb.d);
            acc += @as(f32, @floatFromInt(blockDotQ4_0(wb, xb))) * scale;
        }
        return acc;
    }

    /// ggml's x86 `quantize_row_q8_0` (scale `amax / 127`, quants `x * (127
    /// / amax)` rounded to nearest, ties to even), with a clamp to [-127,
    /// 127]: what llama.cpp runs on x86 for activations. Returns false,
    /// leaving the block unspecified, when the block is not finite.
    pub fn quantizeBlockQ8_0(x: *const [qk]f32, out: *BlockQ8_0) bool {
        var amax: f32 = 0;
        for (x) |v| {
            if (!std.math.isFinite(v)) return false;
            amax = @max(amax, @abs(v));
        }
        const d = amax / 127.0;
        const id: f32 = if (amax != 0) 127.0 / amax else 0;
        out.d = abi.f32ToF16(d);
        for (x, 0..) |v, j| {
            // For a block of tiny values 127/amax overflows; a non-finite
            // product gives 0 (the scale is 0 too).
            const p = v * id;
            const r = if (std.math.isFinite(p)) std.math.clamp(roundEven(p), -127.0, 127.0) else 0;
            out.qs[j] = @intFromFloat(r);
        }
        return true;
    }
};

// ---------------------------------------------------------------------------
// Integer block dot products.
// ---------------------------------------------------------------------------

const V16i32 = @Vector(16, i32);
const V8i32 = @Vector(8, i32);
const V16i16 = @Vector(16, i16);

pub extern fn @"llvm.x86.avx512.vpdpbusd.512"(V16i32, V16i32, V16i32) V16i32;
pub extern fn @"llvm.x86.avx512.vpdpbusd.256"(V8i32, V8i32, V8i32) V8i32;
pub extern fn @"llvm.x86.avx2.pmadd.ub.sw"(@Vector(32, u8), @Vector(32, i8)) V16i16;
pub extern fn @"llvm.x86.avx2.pmadd.wd"(V16i16, V16i16) V8i32;
pub extern fn @"llvm.x86.avx2.psign.b"(@Vector(32, i8), @Vector(32, i8)) @Vector(32, i8);

/// Two Q4_0 blocks against two Q8_0 blocks with VNNI. Lanes 0..7 hold
/// partial sums of block a, lanes 8..15 those of block b.
inline fn lanesQ4_0x2(wa: *const [16]u8, wb: *const [16]u8, xa: *const [32]i8, xb: *const [32]i8) V16i32 {
    const qa: @Vector(16, u8) = wa.*;
    const qb: @Vector(16, u8) = wb.*;
    const lo_mask: @Vector(16, u8) = @splat(0x0f);
    const four: @Vector(16, u3) = @splat(4);
    const a_lo = qa & lo_mask;
    const a_hi = qa >> four;
    const b_lo = qb & lo_mask;
    const b_hi = qb >> four;
    const a: @Vector(32, u8) = std.simd.join(a_lo, a_hi);
    const b: @Vector(32, u8) = std.simd.join(b_lo, b_hi);
    const w: @Vector(64, u8) = std.simd.join(a, b);
    const xav: @Vector(32, i8) = xa.*;
    const xbv: @Vector(32, i8) = xb.*;
    const x: @Vector(64, i8) = std.simd.join(xav, xbv);
    const zero: V16i32 = @splat(0);
    const ones: @Vector(64, u8) = @splat(1);
    const wx = @"llvm.x86.avx512.vpdpbusd.512"(zero, @bitCast(w), @bitCast(x));
    const sx = @"llvm.x86.avx512.vpdpbusd.512"(zero, @bitCast(ones), @bitCast(x));
    // sum((q - 8) * x) = sum(q * x) - 8 * sum(x)
    return wx - (sx << @splat(3));
}

/// One Q4_0 block against one Q8_0 block with 256-bit VNNI (8 partial lanes).
inline fn lanesQ4_0x1Vnni(w: *const [16]u8, x: *const [32]i8) V8i32 {
    const q: @Vector(16, u8) = w.*;
    const lo = q & @as(@Vector(16, u8), @splat(0x0f));
    const hi = q >> @as(@Vector(16, u3), @splat(4));
    const wv: @Vector(32, u8) = std.simd.join(lo, hi);
    const xv: @Vector(32, i8) = x.*;
    const zero: V8i32 = @splat(0);
    const ones: @Vector(32, u8) = @splat(1);
    const wx = @"llvm.x86.avx512.vpdpbusd.256"(zero, @bitCast(wv), @bitCast(xv));
    const sx = @"llvm.x86.avx512.vpdpbusd.256"(zero, @bitCast(ones), @bitCast(xv));
    return wx - (sx << @splat(3));
}

/// Two Q8_0 weight blocks against two Q8_0 activation blocks with VNNI.
/// vpdpbusd wants one unsigned operand: w ^ 0x80 = w + 128 as u8, so
/// sum(w * x) = sum((w + 128) * x) - 128 * sum(x), exact for every byte.
inline fn lanesQ8_0x2(wa: *const [32]i8, wb: *const [32]i8, xa: *const [32]i8, xb: *const [32]i8) V16i32 {
    const wav: @Vector(32, u8) = @bitCast(wa.*);
    const wbv: @Vector(32, u8) = @bitCast(wb.*);
    const w: @Vector(64, u8) = std.simd.join(wav, wbv) ^ @as(@Vector(64, u8), @splat(0x80));
    const xav: @Vector(32, i8) = xa.*;
    const xbv: @Vector(32, i8) = xb.*;
    const x: @Vector(64, i8) = std.simd.join(xav, xbv);
    const zero: V16i32 = @splat(0);
    const ones: @Vector(64, u8) = @splat(1);
    const wx = @"llvm.x86.avx512.vpdpbusd.512"(zero, @bitCast(w), @bitCast(x));
    const sx = @"llvm.x86.avx512.vpdpbusd.512"(zero, @bitCast(ones), @bitCast(x));
    return wx - (sx << @splat(7));
}

inline fn lanesQ8_0x1Vnni(w: *const [32]i8, x: *const [32]i8) V8i32 {
    const wv: @Vector(32, u8) = @as(@Vector(32, u8), @bitCast(w.*)) ^ @as(@Vector(32, u8), @splat(0x80));
    const xv: @Vector(32, i8) = x.*;
    const zero: V8i32 = @splat(0);
    const ones: @Vector(32, u8) = @splat(1);
    const wx = @"llvm.x86.avx512.vpdpbusd.256"(zero, @bitCast(wv), @bitCast(xv));
    const sx = @"llvm.x86.avx512.vpdpbusd.256"(zero, @bitCast(ones), @bitCast(xv));
    return wx - (sx << @splat(7));
}

/// AVX2: one Q4_0 block. vpmaddubsw(q, x) pairs stay within i16
/// (|2 * 15 * 128| < 2^15), and so does the 8 * sum(x) correction.
inline fn lanesQ4_0x1Avx2(w: *const [16]u8, x: *const [32]i8) V8i32 {
    const q: @Vector(16, u8) = w.*;
    const lo = q & @as(@Vector(16, u8), @splat(0x0f));
    const hi = q >> @as(@Vector(16, u3), @splat(4));
    const wv: @Vector(32, u8) = std.simd.join(lo, hi);
    const xv: @Vector(32, i8) = x.*;
    const wx = @"llvm.x86.avx2.pmadd.ub.sw"(wv, xv);
    const sx = @"llvm.x86.avx2.pmadd.ub.sw"(@splat(8), xv);
    return @"llvm.x86.avx2.pmadd.wd"(wx - sx, @splat(1));
}

/// AVX2: one Q8_0 block, widened to i16 so that every byte value is exact.
inline fn lanesQ8_0x1Avx2(w: *const [32]i8, x: *const [32]i8) V8i32 {
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
inline fn lanesQ4_0x1Neon(w: *const [16]u8, x: *const [32]i8) V8i32 {
    const q: @Vector(16, u8) = w.*;
    const lo = q & @as(@Vector(16, u8), @splat(0x0f));
    const hi = q >> @as(@Vector(16, u3), @splat(4));
    const wv: @Vector(32, i8) = @as(@Vector(32, i8), @bitCast(std.simd.join(lo, hi))) - @as(@Vector(32, i8), @splat(8));
    return dot4(8, wv, x.*);
}

/// NEON: one Q8_0 block.
inline fn lanesQ8_0x1Neon(w: *const [32]i8, x: *const [32]i8) V8i32 {
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
// Tiled matrices (.cflow/.vflow): one output stripe of one matrix at a time.
// A tile is a 16-byte header, f16 scales [rows][groups], then quantized data
// [rows][groups][16 or 32 bytes] (Q4_0, Q8_0), or f32 [rows][cols] (F32).
// ---------------------------------------------------------------------------

pub const tile_rows_max: usize = 128;
pub const tile_cols_max: usize = 256;
pub const tile_header_bytes: usize = 16;

pub const TileType = enum(u32) { q4_0 = 1, q8_0 = 2, f32 = 3 };

fn groupBytes(comptime t: TileType) usize {
    return switch (t) {
        .q4_0 => 16,
        .q8_0 => 32,
        .f32 => 0,
    };
}

/// Bytes of one tile of `rows x cols`.
pub fn tileBytes(t: TileType, rows: usize, cols: usize) usize {
    const groups = rows * ((cols + qk - 1) / qk);
    return tile_header_bytes + switch (t) {
        .q4_0 => groups * (2 + 16),
        .q8_0 => groups * (2 + 32),
        .f32 => rows * cols * 4,
    };
}

/// Bytes of one output stripe (rows [r0, r0 + tr)) of a matrix: its column tiles.
pub fn stripeBytes(t: TileType, tr: usize, cols: usize) usize {
    var total: usize = 0;
    var c0: usize = 0;
    while (c0 < cols) : (c0 += tile_cols_max) total += tileBytes(t, tr, @min(tile_cols_max, cols - c0));
    return total;
}

inline fn f16At(p: [*]const u8) f32 {
    return abi.f16ToF32(@as(u16, p[0]) | (@as(u16, p[1]) << 8));
}

/// Integer lanes of one (or two) quantized groups against Q8_0 activations.
fn QLanes(comptime t: TileType) type {
    return struct {
        const G = if (t == .q4_0) [16]u8 else [32]i8;
        inline fn one(w: *const G, x: *const [32]i8) V8i32 {
            return switch (variant) {
                .avx512vnni, .avxvnni => if (t == .q4_0) lanesQ4_0x1Vnni(w, x) else lanesQ8_0x1Vnni(w, x),
                .avx2 => if (t == .q4_0) lanesQ4_0x1Avx2(w, x) else lanesQ8_0x1Avx2(w, x),
                .neon, .neon_dotprod => if (t == .q4_0) lanesQ4_0x1Neon(w, x) else lanesQ8_0x1Neon(w, x),
                .scalar => unreachable,
            };
        }
        inline fn two(wa: *const G, wb: *const G, xa: *const [32]i8, xb: *const [32]i8) V16i32 {
            return if (t == .q4_0) lanesQ4_0x2(wa, wb, xa, xb) else lanesQ8_0x2(wa, wb, xa, xb);
        }
        fn scalarGroup(w: *const G, x: *const [32]i8) i32 {
            if (is_wasm) return if (t == .q4_0) wasmDotQ4_0(w, x) else wasmDotQ8_0(w, x);
            var sum: i32 = 0;
            if (t == .q4_0) {
                for (0..16) |j| {
                    sum += (@as(i32, w[j] & 15) - 8) * @as(i32, x[j]);
                    sum += (@as(i32, w[j] >> 4) - 8) * @as(i32, x[j + 16]);
                }
            } else {
                for (0..32) |j| sum += @as(i32, w[j]) * @as(i32, x[j]);
            }
            return sum;
        }
    };
}

/// y[r] for r in [0, tr) = row r of the stripe at `base` times x (Q8_0
/// blocks covering `cols`, zero-padded to whole groups). Column tiles are
/// summed left to right; each tile's row dot is computed group by group.
fn stripeQuant(comptime t: TileType, base: [*]const u8, tr: usize, cols: usize, x: []const BlockQ8_0, y: []f32) void {
    assert(tr >= 1 and tr <= tile_rows_max);
    assert(y.len == tr and x.len * qk >= cols);
    const gb = groupBytes(t);
    const L = QLanes(t);
    @memset(y, 0);
    var pos: usize = 0;
    var c0: usize = 0;
    while (c0 < cols) : (c0 += tile_cols_max) {
        const tc = @min(tile_cols_max, cols - c0);
        const ng = (tc + qk - 1) / qk;
        const xs = x[c0 / qk ..][0..ng];
        const scales = base + pos + tile_header_bytes;
        const data = scales + tr * ng * 2;
        for (0..tr) |r| {
            const srow = scales + r * ng * 2;
            const drow = data + r * ng * gb;
            var acc: f32 = 0;
            switch (isa) {
                .scalar => for (0..ng) |g| {
                    const w: *const L.G = @ptrCast(drow + g * gb);
                    const isum = L.scalarGroup(w, &xs[g].qs);
                    acc += @as(f32, @floatFromInt(isum)) * (f16At(srow + g * 2) * abi.f16ToF32(xs[g].d));
                },
                .avx2, .neon => {
                    var v: @Vector(8, f32) = @splat(0);
                    for (0..ng) |g| {
                        const w: *const L.G = @ptrCast(drow + g * gb);
                        const l: @Vector(8, f32) = @floatFromInt(L.one(w, &xs[g].qs));
                        v = @mulAdd(@Vector(8, f32), l, @splat(f16At(srow + g * 2) * abi.f16ToF32(xs[g].d)), v);
                    }
                    acc = @reduce(.Add, v);
                },
                .avx512 => {
                    var v: @Vector(16, f32) = @splat(0);
                    var g: usize = 0;
                    while (g + 2 <= ng) : (g += 2) {
                        const wa: *const L.G = @ptrCast(drow + g * gb);
                        const wb: *const L.G = @ptrCast(drow + (g + 1) * gb);
                        const l: @Vector(16, f32) = @floatFromInt(L.two(wa, wb, &xs[g].qs, &xs[g + 1].qs));
                        const sa: @Vector(8, f32) = @splat(f16At(srow + g * 2) * abi.f16ToF32(xs[g].d));
                        const sb: @Vector(8, f32) = @splat(f16At(srow + (g + 1) * 2) * abi.f16ToF32(xs[g + 1].d));
                        v = @mulAdd(@Vector(16, f32), l, std.simd.join(sa, sb), v);
                    }
                    acc = @reduce(.Add, v);
                    if (g < ng) {
                        const w: *const L.G = @ptrCast(drow + g * gb);
                        const l: @Vector(8, f32) = @floatFromInt(L.one(w, &xs[g].qs));
                        acc += @reduce(.Add, l) * (f16At(srow + g * 2) * abi.f16ToF32(xs[g].d));
                    }
                },
            }
            y[r] += acc;
        }
        pos += tileBytes(t, tr, tc);
    }
}

/// The same for F32 tiles with f32 activations.
fn stripeF32(base: [*]const u8, tr: usize, cols: usize, x: []const f32, y: []f32) void {
    assert(tr >= 1 and tr <= tile_rows_max);
    assert(y.len == tr and x.len >= cols);
    @memset(y, 0);
    var pos: usize = 0;
    var c0: usize = 0;
    while (c0 < cols) : (c0 += tile_cols_max) {
        const tc = @min(tile_cols_max, cols - c0);
        const w: [*]align(1) const f32 = @ptrCast(base + pos + tile_header_bytes);
        for (0..tr) |r| {
            const row = w + r * tc;
            const V = @Vector(lanes, f32);
            var v: V = @splat(0);
            var c: usize = 0;
            if (lanes > 1) {
                while (c + lanes <= tc) : (c += lanes) {
                    const a: V = row[c..][0..lanes].*;
                    const b: V = x[c0 + c ..][0..lanes].*;
                    v = @mulAdd(V, a, b, v);
                }
            }
            var acc: f32 = @reduce(.Add, v);
            while (c < tc) : (c += 1) acc += row[c] * x[c0 + c];
            y[r] += acc;
        }
        pos += tileBytes(.f32, tr, tc);
    }
}

/// One output stripe of a tiled matrix: dispatches on the tile type.
pub fn tileStripe(t: TileType, base: [*]const u8, tr: usize, cols: usize, xq: []const BlockQ8_0, xf: []const f32, y: []f32) void {
    switch (t) {
        .q4_0 => stripeQuant(.q4_0, base, tr, cols, xq, y),
        .q8_0 => stripeQuant(.q8_0, base, tr, cols, xq, y),
        .f32 => stripeF32(base, tr, cols, xf, y),
    }
}

/// Little-endian reads of unaligned bytes (records, ActRows).
pub inline fn readU32(p: [*]const u8) u32 {
    return std.mem.readInt(u32, p[0..4], .little);
}

pub inline fn readF32(p: [*]const u8) f32 {
    return @bitCast(readU32(p));
}

pub inline fn readI32(p: [*]const u8) i32 {
    return @bitCast(readU32(p));
}

// ---------------------------------------------------------------------------
// Activation quantization.
// ---------------------------------------------------------------------------

/// Rounds to the nearest integer, ties to even (x86's `_MM_ROUND_NEAREST`),
/// for |v| <= 2^22: adding and taking away 1.5 * 2^23 leaves the integer
/// part the default rounding mode gave. Activations use it with
/// `127 / amax`, as ggml's x86 `quantize_row_q8_0` does (its scalar
/// `_ref` rounds ties away from zero and multiplies by 1 / d).
inline fn roundEven(v: anytype) @TypeOf(v) {
    const magic: @TypeOf(v) = if (@typeInfo(@TypeOf(v)) == .vector) @splat(12582912.0) else 12582912.0;
    return (v + magic) - magic;
}

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
// Float kernels and the streaming read (float_kernels.zig).
// ---------------------------------------------------------------------------

const fk = @import("float_kernels.zig");
pub const rmsNorm = fk.rmsNorm;
pub const softmax = fk.softmax;
pub const Argmax = fk.Argmax;
pub const argmax = fk.argmax;
pub const rope = fk.rope;
pub const ropeAngles = fk.ropeAngles;
pub const ropeTable = fk.ropeTable;
pub const Gate = fk.Gate;
pub const gatedMul = fk.gatedMul;
pub const streamRead = fk.streamRead;

// ---------------------------------------------------------------------------
// Tests: each variant against the scalar reference, on lengths hitting tails.
// ---------------------------------------------------------------------------

const testing = std.testing;

pub fn randomQ8Blocks(rng: std.Random, out: []BlockQ8_0, full_range: bool) void {
    for (out) |*b| {
        b.d = abi.f32ToF16(rng.float(f32) * 0.1 + 0.001);
        for (&b.qs) |*q| {
            q.* = if (full_range) rng.int(i8) else rng.intRangeAtMost(i8, -127, 127);
        }
    }
}

pub fn randomQ4Blocks(rng: std.Random, out: []BlockQ4_0) void {
    for (out) |*b| {
        b.d = abi.f32ToF16(rng.float(f32) * 0.1 + 0.001);
        for (&b.qs) |*q| q.* = rng.int(u8);
    }
}

/// |expected - actual| <= rel * magnitude + 1e-12, where magnitude is the
/// larger of the two values, or for sums the sum of the absolute terms
/// (reordering a sum can only move it by a multiple of that).
pub fn expectClose(expected: f32, actual: f32, rel: f32) !void {
    return expectCloseMag(expected, actual, rel, @max(@abs(expected), @abs(actual)));
}

pub fn expectCloseMag(expected: f32, actual: f32, rel: f32, magnitude: f32) !void {
    const diff = @abs(expected - actual);
    if (diff > rel * magnitude + 1e-12) {
        std.debug.print("expected {d}, got {d} (diff {d})\n", .{ expected, actual, diff });
        return error.TestExpectedApproxEq;
    }
}

/// Sum over all products of |w_j x_j| (scaled): the textbook bound on how
/// far any summation order can move a dot product is a multiple of this.
pub fn absTermsQ8(w: []const BlockQ8_0, x: []const BlockQ8_0) f32 {
    var m: f32 = 0;
    for (w, x) |*a, *b| {
        var t: i32 = 0;
        for (a.qs, b.qs) |p, q| t += @intCast(@abs(@as(i32, p) * q));
        m += @as(f32, @floatFromInt(t)) * abi.f16ToF32(a.d) * abi.f16ToF32(b.d);
    }
    return m;
}

pub fn absTermsQ4(w: []const BlockQ4_0, x: []const BlockQ8_0) f32 {
    var m: f32 = 0;
    for (w, x) |*a, *b| {
        var t: i32 = 0;
        for (0..qk / 2) |j| {
            t += @intCast(@abs((@as(i32, a.qs[j] & 15) - 8) * b.qs[j]));
            t += @intCast(@abs((@as(i32, a.qs[j] >> 4) - 8) * b.qs[j + 16]));
        }
        m += @as(f32, @floatFromInt(t)) * abi.f16ToF32(a.d) * abi.f16ToF32(b.d);
    }
    return m;
}

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

test "tiled stripes equal row-major dots" {
    var prng = std.Random.DefaultPrng.init(99);
    const rng = prng.random();
    const cols = 300; // two column tiles, a partial group
    const tr = 5;
    const ng_total = (cols + 31) / 32;
    var x: [ng_total]BlockQ8_0 = undefined;
    randomQ8Blocks(rng, &x, false);
    // padding of the last activation group: zero
    for (cols % 32..32) |j| x[ng_total - 1].qs[j] = 0;
    inline for (.{ TileType.q4_0, TileType.q8_0 }) |t| {
        const gb = groupBytes(t);
        var buf: [2 * (16 + tr * 8 * (2 + 32))]u8 = undefined;
        var rows: [tr][ng_total]if (t == .q4_0) BlockQ4_0 else BlockQ8_0 = undefined;
        for (&rows) |*row| {
            if (t == .q4_0) randomQ4Blocks(rng, row) else randomQ8Blocks(rng, row, true);
        }
        // build the two tiles
        var pos: usize = 0;
        var c0: usize = 0;
        while (c0 < cols) : (c0 += 256) {
            const tc = @min(256, cols - c0);
            const ng = (tc + 31) / 32;
            @memset(buf[pos..][0..16], 0);
            const sc = pos + 16;
            const dt = sc + tr * ng * 2;
            for (0..tr) |r| for (0..ng) |g| {
                const b = &rows[r][c0 / 32 + g];
                buf[sc + (r * ng + g) * 2] = @truncate(b.d);
                buf[sc + (r * ng + g) * 2 + 1] = @truncate(b.d >> 8);
                @memcpy(buf[dt + (r * ng + g) * gb ..][0..gb], std.mem.asBytes(&b.qs));
            };
            pos += tileBytes(t, tr, tc);
        }
        var y: [tr]f32 = undefined;
        tileStripe(t, &buf, tr, cols, &x, &[_]f32{}, &y);
        for (0..tr) |r| {
            const want = if (t == .q4_0) scalar.dotQ4_0(&rows[r], &x) else scalar.dotQ8_0(&rows[r], &x);
            const mag = if (t == .q4_0) absTermsQ4(&rows[r], &x) else absTermsQ8(&rows[r], &x);
            try expectCloseMag(want, y[r], 1e-5, mag);
        }
    }
}
