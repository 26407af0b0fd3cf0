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

// ---------------------------------------------------------------------------
// Packed 16-row panels (packing.zig): one 64-byte load feeds one vpdpbusd for
// 16 outputs; weights are unsigned, corrected by the activation sums.
// ---------------------------------------------------------------------------

const packing = @import("packing.zig");
const kp = @import("k_panels.zig");
const ActRow = packing.ActRow;

pub inline fn readU32(p: [*]const u8) u32 {
    return std.mem.readInt(u32, p[0..4], .little);
}

pub inline fn readF32(p: [*]const u8) f32 {
    return @bitCast(readU32(p));
}

pub inline fn readI32(p: [*]const u8) i32 {
    return @bitCast(readU32(p));
}

fn correction(comptime q: packing.Quant) i32 {
    return switch (q) {
        .q4_0 => 8,
        .q8_0 => 128,
        // Q4_1's nibbles are its quants; its min term is added apart.
        .q4_1 => 0,
        // Q5_0's quants are 0..31, centred on 16.
        .q5_0 => 16,
        // K records have their own kernels (k_panels.zig).
        .q4_k, .q6_k => unreachable,
    };
}

pub extern fn @"llvm.x86.avx2.psign.b"(@Vector(32, i8), @Vector(32, i8)) @Vector(32, i8);

/// How a variant computes a 32-column group of panel rows: its dot-product
/// primitive and how many of a panel's 16 rows one vector holds.
pub const PanelPrim = enum {
    /// `vpdpbusd` on zmm (AVX-512 VNNI): 16 rows per vector.
    vnni512,
    /// `vpdpbusd` on ymm (AVX-VNNI): 8 rows per vector.
    vnni256,
    /// `vpmaddubsw` + `vpmaddwd` on ymm (AVX2): 8 rows per vector.
    maddubs256,
    /// `sdot` on 128-bit vectors (aarch64 dotprod): 4 rows per vector.
    sdot128,
    /// Widening products `smull` + pairwise sums on 128-bit vectors
    /// (aarch64 Advanced SIMD): 4 rows per vector.
    smull128,
};

/// This variant's panel primitive; null runs the scalar loop (panelScalar).
pub const panel_prim: ?PanelPrim = switch (variant) {
    .scalar => null,
    .avx2 => .maddubs256,
    .avxvnni => .vnni256,
    .avx512vnni => .vnni512,
    .neon_dotprod => .sdot128,
    .neon => .smull128,
};

/// Tokens per weight load in a prefill batch or a batched decode step (the
/// register block is 16 rows x this many tokens; the rest of a batch goes in
/// halving blocks). 3 for 256-bit vectors (the Zen 5 EPYC, docs/KERNELS.md);
/// 8 for AVX-512, measured on a Zen 4 EPYC where 8 sequences decoding
/// together went from 566 to 773 tok/s on SmolLM2 Q4_0 and from 176 to 212
/// on Qwen2.5-Coder-0.5B, prefill unchanged within noise.
fn panelBlock(comptime prim: PanelPrim) usize {
    return switch (prim) {
        .vnni512 => 8,
        .vnni256 => 3,
        .maddubs256 => 3,
        // Not measured (no aarch64 machine here): 32 vector registers, as
        // AVX-512 has.
        .sdot128, .smull128 => 4,
    };
}

/// The exact integer dot products of one 32-column group of a panel with
/// one token's Q8_0 activation, for the `rows` panel rows one vector holds:
/// `prepare` readies a 4-column chunk of weights once for every token,
/// `step` adds its products, `finish` gives sum(w * x) per row.
///
/// - VNNI: unsigned weights (Q4_0 nibbles, Q8_0 `w XOR 0x80`) against
///   signed activations, corrected by `8 sum(x)` or `128 sum(x)`.
/// - AVX2, Q4_0: `vpmaddubsw` of nibbles (<= 15) with activations: a pair
///   is at most 2 * 15 * 128 = 3840 in magnitude, so the 8 pairs of the 4
///   chunks sum in i16 (<= 30720) before one `vpmaddwd`, then `- 8 sum(x)`.
/// - AVX2, Q8_0: the sign trick, `vpmaddubsw(|w|, sign(x, w))`: a pair is
///   at most 2 * 128 * 127 = 32512, within i16, because activation quants
///   are in [-127, 127] (the Q8_0 quantizer clamps them; the sign of -128
///   would not negate). Each chunk widens to i32 at once.
fn PanelDot(comptime prim: PanelPrim, comptime q: packing.Quant) type {
    return struct {
        pub const rows: usize = switch (prim) {
            .vnni512 => 16,
            .vnni256, .maddubs256 => 8,
            .sdot128, .smull128 => 4,
        };
        /// The NEON primitives multiply signed by signed: Q8_0 weights get
        /// their sign back in `prepare` and need no correction.
        const signed_weights = prim == .sdot128 or prim == .smull128;
        /// Q4_0, Q4_1 and Q5_0 records hold ggml's nibble bytes (Q5_0's fifth
        /// bits apart, `prepare5`).
        const nibbles = q != .q8_0;
        pub const VB = @Vector(rows * 4, u8);
        const VI = @Vector(rows, i32);
        const VX = @Vector(rows * 4, i8);
        pub const W = struct { a: VB, b: VB };
        pub const Acc = switch (prim) {
            .vnni512, .vnni256, .sdot128, .smull128 => [2]VI,
            // Q5_0's pairs (<= 2 * 31 * 128) widen every chunk.
            .maddubs256 => if (nibbles and q != .q5_0) V16i16 else V8i32,
        };

        pub inline fn zero() Acc {
            return switch (prim) {
                .vnni512, .vnni256, .sdot128, .smull128 => .{ @splat(0), @splat(0) },
                .maddubs256 => @splat(0),
            };
        }

        pub inline fn prepare(wv: VB) W {
            if (nibbles) {
                return .{ .a = wv & @as(VB, @splat(0x0f)), .b = wv >> @as(@Vector(rows * 4, u3), @splat(4)) };
            }
            if (prim == .maddubs256) {
                const signed: VX = @bitCast(wv ^ @as(VB, @splat(0x80)));
                return .{ .a = @abs(signed), .b = @bitCast(signed) };
            }
            if (signed_weights) {
                const signed = wv ^ @as(VB, @splat(0x80));
                return .{ .a = signed, .b = signed };
            }
            return .{ .a = wv, .b = wv };
        }

        /// Q5_0: chunk c's nibbles with their fifth bits from the rows' `qh`
        /// words (qhv: row r's word at bytes 4r..4r+3): byte b of a row gets
        /// bit 4c + b (low nibble, column 4c + b) and bit 16 + 4c + b (high
        /// nibble), spread by a byte shuffle within 128-bit lanes.
        pub inline fn prepare5(wv: VB, qhv: VB, comptime c: usize) W {
            const n = rows * 4;
            const masks = comptime blk: {
                var lo: [n]i32 = undefined;
                var hi: [n]i32 = undefined;
                var pat: [n]u8 = undefined;
                for (0..n) |i| {
                    lo[i] = @intCast((i / 4) * 4 + c / 2);
                    hi[i] = @intCast((i / 4) * 4 + 2 + c / 2);
                    pat[i] = @as(u8, 1) << @intCast(4 * (c % 2) + i % 4);
                }
                break :blk .{ .lo = lo, .hi = hi, .pat = pat };
            };
            const pat: VB = masks.pat;
            const zero_b: VB = @splat(0);
            const sixteen: VB = @splat(16);
            const rep_lo = @shuffle(u8, qhv, undefined, @as(@Vector(n, i32), masks.lo));
            const rep_hi = @shuffle(u8, qhv, undefined, @as(@Vector(n, i32), masks.hi));
            const p = prepare(wv);
            return .{
                .a = p.a | @select(u8, (rep_lo & pat) != zero_b, sixteen, zero_b),
                .b = p.b | @select(u8, (rep_hi & pat) != zero_b, sixteen, zero_b),
            };
        }

        /// Four activation bytes at p, broadcast to every row.
        inline fn broadcast(p: [*]const u8) VX {
            return @bitCast(@as(VI, @splat(@bitCast(readU32(p)))));
        }

        /// acc + the 4-byte dot of each row (u8 x i8 on x86, i8 x i8 on NEON).
        inline fn vnni(acc: VI, w: VB, x: VX) VI {
            return switch (prim) {
                .vnni512 => @"llvm.x86.avx512.vpdpbusd.512"(acc, @bitCast(w), @bitCast(x)),
                .vnni256 => @"llvm.x86.avx512.vpdpbusd.256"(acc, @bitCast(w), @bitCast(x)),
                .sdot128 => @"llvm.aarch64.neon.sdot.v4i32.v16i8"(acc, @bitCast(w), x),
                .smull128 => acc + dot4(rows, @bitCast(w), x),
                .maddubs256 => unreachable,
            };
        }

        /// Chunk c (columns 4c..4c+3, and 16+4c.. for Q4_0's high nibbles)
        /// of the group whose activation quants start at qs.
        pub inline fn step(acc: *Acc, w: W, comptime c: usize, qs: [*]const u8) void {
            switch (prim) {
                .vnni512, .vnni256, .sdot128, .smull128 => if (nibbles) {
                    acc[0] = vnni(acc[0], w.a, broadcast(qs + 4 * c));
                    acc[1] = vnni(acc[1], w.b, broadcast(qs + 16 + 4 * c));
                } else {
                    acc[c % 2] = vnni(acc[c % 2], w.a, broadcast(qs + 4 * c));
                },
                .maddubs256 => if (nibbles) {
                    const lo = @"llvm.x86.avx2.pmadd.ub.sw"(w.a, broadcast(qs + 4 * c));
                    const hi = @"llvm.x86.avx2.pmadd.ub.sw"(w.b, broadcast(qs + 16 + 4 * c));
                    if (q == .q5_0) {
                        acc.* += @"llvm.x86.avx2.pmadd.wd"(lo + hi, @splat(1));
                    } else {
                        acc.* += lo + hi;
                    }
                } else {
                    const xs = @"llvm.x86.avx2.psign.b"(broadcast(qs + 4 * c), @bitCast(w.b));
                    acc.* += @"llvm.x86.avx2.pmadd.wd"(@"llvm.x86.avx2.pmadd.ub.sw"(w.a, xs), @splat(1));
                },
            }
        }

        /// sum(w * x) of each row, exact; sum_x is the group's sum of quants.
        pub inline fn finish(acc: Acc, sum_x: i32) VI {
            return switch (prim) {
                .vnni512, .vnni256 => acc[0] + acc[1] - @as(VI, @splat(sum_x * correction(q))),
                .sdot128, .smull128 => if (nibbles)
                    acc[0] + acc[1] - @as(VI, @splat(sum_x * correction(q)))
                else
                    acc[0] + acc[1],
                .maddubs256 => if (q == .q5_0)
                    acc - @as(VI, @splat(sum_x * correction(q)))
                else if (nibbles)
                    @"llvm.x86.avx2.pmadd.wd"(acc, @splat(1)) - @as(VI, @splat(sum_x * correction(q)))
                else
                    acc,
            };
        }
    };
}

/// NT tokens against one panel: out[j][r] = row r . x_j for the 16 rows.
/// Per row and group: acc = fma(f32(sum(w * x)), d_w * d_x, acc), groups
/// left to right, the arithmetic of panelScalar whatever the vector width.
/// How far ahead, in bytes rounded up to whole records, the first token
/// block over a panel (the one that streams it from memory; panelTokens)
/// touches the panels (PREFETCHT0 over a record per record read, within
/// the call's panels), as `k_panels.zig`'s `prefetch_records` does for the K
/// records. A 512 MB matrix of 2,048 columns, Ice Lake, best of 3 runs of 3,
/// without -> with (8 KB ahead): 1 thread Q4_0 7.9 -> 9.7 GB/s, Q8_0 8.9 ->
/// 9.7, Q5_0 6.7 -> 9.0 (the load loop: 10.3); 2 threads 14.8 -> 18.1, 12.9
/// -> 16.2, 13.0 -> 17.3. 4 KB gained less, 16 KB the same.
const prefetch_ahead: usize = 8192;

/// Whether a one-token block streaming a panel prefetches ahead of its reads
/// (`stream`: `prefetch_ahead` here, `prefetch_records` in k_panels.zig),
/// or leaves it to the hardware prefetchers; the first block of several
/// tokens always prefetches. Each variant object holds its own copy;
/// `cf_set_panel_prefetch` (root.zig) sets every linked one, from the CPU
/// unless told. It paid on Intel (Ice Lake: the figures above) and cost on
/// AMD: Zen 4, Qwen2.5-Coder-1.5B Q4_K_M decode at 1 thread 12.6-14.9 tok/s
/// with it, 17.7-22.1 without. Several tokens gain from it there too: a
/// speculative check's rows cost 0.05 of a decode step with the prefetch,
/// 0.22 without (docs/KERNELS.md).
pub var panel_prefetch = std.atomic.Value(bool).init(true);

/// Where the first block of several tokens over a panel prefetches:
/// PREFETCHT0 (L1) or PREFETCHT1 (L2); K records (k_panels.zig) three records
/// ahead to L1 or two to L2, the group records `prefetch_ahead` bytes ahead
/// either way. Set with `panel_prefetch` (`cf_set_panel_prefetch`), from the
/// CPU's vendor: L2 on AMD, L1 elsewhere. Zen 4, `forwardAll` of k rows, 2
/// threads, best of 15-20 over 3-4 rounds, ms: Qwen2.5-Coder-1.5B Q4_K_M, k
/// = 2, 3, 4, 6, 8 rows 35.2, 40.1, 44.7, 52.5, 58.4 to L1, 33.4, 36.0, 39.2,
/// 48.2, 52.3 to L2 (one row: 30.5); the 1B geometry Q4_0, 16.4, 18.9, 22.1,
/// 27.8, 32.1 to L1, 16.2, 15.6, 18.3, 22.7, 29.5 to L2 (one row: 13.5). The
/// L1 setting was tuned on Ice Lake, where L2 was not measured.
pub var multi_prefetch_l2 = std.atomic.Value(bool).init(false);

/// The cache level a prefetch fills.
pub const PrefetchTo = enum { l1, l2 };

/// Touches (PREFETCHT0, line by line) the record of `rec` bytes `d` records
/// after the one at r, when it lies before `end` (the end of the panels the
/// call streams).
pub inline fn prefetchRecord(comptime rec: usize, comptime d: usize, r: [*]const u8, end: [*]const u8) void {
    prefetchPart(.l1, rec, d, 1, 0, r, end);
}

/// Part `part` of `parts` of prefetchRecord's lines: a kernel that spends
/// long on a record (several tokens) spreads the record's prefetches over
/// its steps instead of issuing them in one burst.
pub inline fn prefetchPart(comptime to: PrefetchTo, comptime rec: usize, comptime d: usize, comptime parts: usize, comptime part: usize, r: [*]const u8, end: [*]const u8) void {
    if (@intFromPtr(r) + (d + 1) * rec > @intFromPtr(end)) return;
    const ahead = r + d * rec;
    const lines = comptime std.math.divCeil(usize, rec, 64) catch unreachable;
    const locality: u2 = switch (to) {
        .l1 => 3,
        .l2 => 2,
    };
    comptime var line: usize = part * lines / parts;
    inline while (line < (part + 1) * lines / parts) : (line += 1) @prefetch(ahead + line * 64, .{ .rw = .read, .locality = locality, .cache = .data });
}

/// Part `part` of `parts` of the record ahead, for the first block of
/// several tokens over a panel: to L2 `d_l2` records ahead when `to_l2`
/// (`multi_prefetch_l2`), else to L1 `d_l1` records ahead.
pub inline fn prefetchSeveral(to_l2: bool, comptime rec: usize, comptime d_l1: usize, comptime d_l2: usize, comptime parts: usize, comptime part: usize, r: [*]const u8, end: [*]const u8) void {
    if (to_l2) {
        prefetchPart(.l2, rec, d_l2, parts, part, r, end);
    } else {
        prefetchPart(.l1, rec, d_l1, parts, part, r, end);
    }
}

/// `stream`: the panel comes from memory (the first token block over it),
/// so the kernel prefetches ahead, up to `end`, the end of the call's panels.
inline fn panelSimd(comptime prim: PanelPrim, comptime q: packing.Quant, comptime NT: usize, panel: [*]const u8, ng: usize, stream: bool, end: [*]const u8, x: [*]const u8, x_stride: usize, out: *[NT][16]f32) void {
    @setEvalBranchQuota(200000);
    const D = PanelDot(prim, q);
    const R = D.rows;
    const H = 16 / R;
    const VF = @Vector(R, f32);
    const rec = comptime packing.recordBytes(q);
    const n_chunks = comptime packing.groupBytes(q) / 4;
    const head = comptime packing.headBytes(q);
    comptime assert(R * H == packing.panel_rows and n_chunks * 64 + head == rec);
    const so = ActRow.scalesOffset(ng);
    const su = ActRow.sumsOffset(ng);
    // One token streams each panel from memory: both halves of a record in
    // the group loop, so that each cache line is used whole while it is in
    // L1. Several tokens read the panel from cache: one half at a time over
    // all groups, so that a 256-bit variant's 16 registers hold one half's
    // accumulators without spilling. Each row's arithmetic is the same.
    const halves_outside = NT > 1 and H > 1;
    const HO = if (halves_outside) H else 1;
    const HI = if (halves_outside) 1 else H;
    const to_l2 = NT > 1 and stream and multi_prefetch_l2.load(.monotonic);
    inline for (0..HO) |ho| {
        var acc: [NT][HI]VF = undefined;
        inline for (0..NT) |j| {
            inline for (0..HI) |hi| acc[j][hi] = @splat(0);
        }
        for (0..ng) |g| {
            const r = panel + g * rec;
            if (stream and ho == 0) {
                const d = comptime std.math.divCeil(usize, prefetch_ahead, rec) catch unreachable;
                prefetchSeveral(to_l2, rec, d, d, 1, 0, r, end);
            }
            inline for (0..HI) |hi| {
                const h = ho + hi;
                const sc: @Vector(R, f16) = @bitCast(r[h * R * 2 ..][0 .. R * 2].*);
                const ws: VF = @floatCast(sc);
                var part: [NT]D.Acc = undefined;
                inline for (0..NT) |j| part[j] = D.zero();
                const qhv: D.VB = if (q == .q5_0) r[packing.scale_bytes + h * R * 4 ..][0 .. R * 4].* else undefined;
                inline for (0..n_chunks) |c| {
                    const wv: D.VB = r[head + c * 64 + h * R * 4 ..][0 .. R * 4].*;
                    const pw = if (q == .q5_0) D.prepare5(wv, qhv, c) else D.prepare(wv);
                    inline for (0..NT) |j| D.step(&part[j], pw, c, x + j * x_stride + g * abi.q8_0_block_bytes + 2);
                }
                inline for (0..NT) |j| {
                    const xr = x + j * x_stride;
                    const tot: VF = @floatFromInt(D.finish(part[j], readI32(xr + su + g * 4)));
                    const dx = readF32(xr + so + g * 4);
                    const s = ws * @as(VF, @splat(dx));
                    acc[j][hi] = @mulAdd(VF, tot, s, acc[j][hi]);
                    if (q == .q4_1) {
                        // + m d_x sum(x): the min of each row times the group's activations.
                        const mn: @Vector(R, f16) = @bitCast(r[packing.scale_bytes + h * R * 2 ..][0 .. R * 2].*);
                        const sx: f32 = @floatFromInt(readI32(xr + su + g * 4));
                        acc[j][hi] = @mulAdd(VF, @floatCast(mn), @splat(dx * sx), acc[j][hi]);
                    }
                }
            }
        }
        inline for (0..NT) |j| {
            inline for (0..HI) |hi| out[j][(ho + hi) * R ..][0..R].* = acc[j][hi];
        }
    }
}

/// The same arithmetic one value at a time (the scalar variant, and the
/// reference the tests hold every SIMD path to, bit for bit).
fn panelScalar(comptime q: packing.Quant, panel: [*]const u8, ng: usize, x: [*]const u8, out: *[16]f32) void {
    const rec = packing.recordBytes(q);
    const so = ActRow.scalesOffset(ng);
    const su = ActRow.sumsOffset(ng);
    @memset(out, 0);
    for (0..ng) |g| {
        const r = panel + g * rec;
        const qs = x + g * abi.q8_0_block_bytes + 2;
        const dx = readF32(x + so + g * 4);
        const corr = readI32(x + su + g * 4) * correction(q);
        for (0..16) |lane| {
            var sum: i32 = 0;
            for (0..packing.groupBytes(q) / 4) |c| {
                for (0..4) |b| {
                    const wb: i32 = r[packing.headBytes(q) + c * 64 + lane * 4 + b];
                    if (q != .q8_0) {
                        // Q5_0: the fifth bits of columns 4c + b and 16 + 4c + b.
                        const qh: u32 = if (q == .q5_0) std.mem.readInt(u32, r[packing.scale_bytes + lane * 4 ..][0..4], .little) else 0;
                        const h_lo: i32 = @intCast((qh >> @intCast(4 * c + b)) & 1);
                        const h_hi: i32 = @intCast((qh >> @intCast(16 + 4 * c + b)) & 1);
                        sum += ((wb & 15) | (h_lo << 4)) * @as(i32, @as(i8, @bitCast(qs[4 * c + b])));
                        sum += ((wb >> 4) | (h_hi << 4)) * @as(i32, @as(i8, @bitCast(qs[16 + 4 * c + b])));
                    } else {
                        sum += wb * @as(i32, @as(i8, @bitCast(qs[4 * c + b])));
                    }
                }
            }
            const ws = abi.f16ToF32(@as(u16, r[lane * 2]) | (@as(u16, r[lane * 2 + 1]) << 8));
            const s = ws * dx;
            out[lane] = @mulAdd(f32, @floatFromInt(sum - corr), s, out[lane]);
            if (q == .q4_1) {
                const mn = abi.f16ToF32(@as(u16, r[packing.scale_bytes + lane * 2]) | (@as(u16, r[packing.scale_bytes + lane * 2 + 1]) << 8));
                const sx: f32 = @floatFromInt(readI32(x + su + g * 4));
                out[lane] = @mulAdd(f32, mn, dx * sx, out[lane]);
            }
        }
    }
}

/// One block of NT tokens against one panel: out rows [0, valid) of token j
/// to y[j * y_stride ..].
inline fn panelBlockOut(comptime K: type, comptime NT: usize, kern: K, stream: bool, panel: [*]const u8, x: [*]const u8, x_stride: usize, y: [*]f32, y_stride: usize, valid: usize) void {
    var out: [NT][16]f32 = undefined;
    kern.simd(NT, stream, panel, x, x_stride, &out);
    inline for (0..NT) |j| @memcpy(y[j * y_stride ..][0..valid], out[j][0..valid]);
}

/// Runs one panel kernel over panels [0, n_panels) of `pb` bytes each and
/// tokens [0, n_tok), writing the first `rows` rows: `kern.simd(NT, ...)` on
/// blocks of `K.block` tokens and then one block of the rest, or
/// `kern.scalar(...)` on the scalar variant. Every token gets the same
/// arithmetic whatever n_tok (each kernel's contract).
pub inline fn panelTokens(comptime K: type, kern: K, w: [*]const u8, pb: usize, n_panels: usize, x: [*]const u8, x_stride: usize, n_tok: usize, y: [*]f32, y_stride: usize, rows: usize) void {
    // One token prefetches as panel_prefetch says; several always do.
    const prefetch = panel_prefetch.load(.monotonic);
    for (0..n_panels) |p| {
        const panel = w + p * pb;
        const valid: usize = @min(16, rows - p * 16);
        var t: usize = 0;
        if (panel_prim != null) {
            comptime assert(K.block > 1);
            // Whole blocks, then the rest in one block of its own size: a
            // decode step of a few sequences, or a speculative check of a few
            // rows, reads each weight once (5 rows as 4 + 1 read the panel
            // twice and ran the one-token kernel over it).
            while (t + K.block <= n_tok) : (t += K.block) {
                panelBlockOut(K, K.block, kern, t == 0, panel, x + t * x_stride, x_stride, y + t * y_stride + p * 16, y_stride, valid);
            }
            const rest = n_tok - t;
            inline for (1..K.block) |nb| {
                if (rest == nb) panelBlockOut(K, nb, kern, t == 0 and (nb > 1 or prefetch), panel, x + t * x_stride, x_stride, y + t * y_stride + p * 16, y_stride, valid);
            }
        } else {
            while (t < n_tok) : (t += 1) {
                var out: [16]f32 = undefined;
                kern.scalar(panel, x + t * x_stride, &out);
                @memcpy(y[t * y_stride + p * 16 ..][0..valid], out[0..valid]);
            }
        }
    }
}

/// The Q4_0/Q8_0/Q4_1 panel kernels of `ng` 32-column groups, for panelTokens.
fn GroupPanels(comptime q: packing.Quant) type {
    return struct {
        ng: usize,
        end: [*]const u8,
        pub const block: usize = if (panel_prim) |prim| panelBlock(prim) else 1;
        pub inline fn simd(self: @This(), comptime NT: usize, stream: bool, panel: [*]const u8, x: [*]const u8, x_stride: usize, out: *[NT][16]f32) void {
            panelSimd(panel_prim.?, q, NT, panel, self.ng, stream, self.end, x, x_stride, out);
        }
        pub inline fn scalar(self: @This(), panel: [*]const u8, x: [*]const u8, out: *[16]f32) void {
            panelScalar(q, panel, self.ng, x, out);
        }
    };
}

/// y[t * y_stride + 16 p + lane] = (row 16 p + lane) . x_t for panels
/// [0, n_panels) of a packed run and tokens [0, n_tok); only the first
/// `rows` rows are written (the rest are padding). x_t is the ActRow at
/// x + t * x_stride. Every token gets the same arithmetic whatever n_tok.
pub fn packedPanels(q: packing.Quant, w: [*]const u8, n_panels: usize, ng: usize, x: [*]const u8, x_stride: usize, n_tok: usize, y: [*]f32, y_stride: usize, rows: usize) void {
    assert(n_panels >= 1 and ng >= 1 and n_tok >= 1);
    assert(rows > (n_panels - 1) * 16 and rows <= n_panels * 16);
    @setEvalBranchQuota(200000);
    switch (q) {
        inline .q4_k, .q6_k => |qq| kp.kPanels(qq, w, n_panels, ng, x, x_stride, n_tok, y, y_stride, rows),
        inline .q4_0, .q8_0, .q4_1, .q5_0 => |qq| {
            const K = GroupPanels(qq);
            const pb = ng * packing.recordBytes(qq);
            panelTokens(K, K{ .ng = ng, .end = w + n_panels * pb }, w, pb, n_panels, x, x_stride, n_tok, y, y_stride, rows);
        },
    }
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
// Float kernels.
// ---------------------------------------------------------------------------

fn sumSquares(x: []const f32) f32 {
    const V = @Vector(lanes, f32);
    var acc0: V = @splat(0);
    var acc1: V = @splat(0);
    var i: usize = 0;
    if (lanes > 1) {
        while (i + 2 * lanes <= x.len) : (i += 2 * lanes) {
            const a: V = x[i..][0..lanes].*;
            const b: V = x[i + lanes ..][0..lanes].*;
            acc0 = @mulAdd(V, a, a, acc0);
            acc1 = @mulAdd(V, b, b, acc1);
        }
    }
    var s: f32 = @reduce(.Add, acc0 + acc1);
    while (i < x.len) : (i += 1) s += x[i] * x[i];
    return s;
}

/// out = x / sqrt(mean(x^2) + eps) * weight.
pub fn rmsNorm(x: []const f32, weight: []const f32, eps: f32, out: []f32) void {
    assert(x.len > 0);
    assert(weight.len == x.len and out.len == x.len);
    const n: f32 = @floatFromInt(x.len);
    const scale: f32 = 1.0 / @sqrt(sumSquares(x) / n + eps);
    const V = @Vector(lanes, f32);
    var i: usize = 0;
    if (lanes > 1) {
        while (i + lanes <= x.len) : (i += lanes) {
            const v: V = x[i..][0..lanes].*;
            const g: V = weight[i..][0..lanes].*;
            out[i..][0..lanes].* = v * @as(V, @splat(scale)) * g;
        }
    }
    while (i < x.len) : (i += 1) out[i] = x[i] * scale * weight[i];
}

/// In-place softmax. -inf entries (masked) become 0. Returns false, leaving
/// x unchanged, if x holds a NaN or +inf or is entirely -inf.
pub fn softmax(x: []f32) bool {
    assert(x.len > 0);
    var m: f32 = -std.math.inf(f32);
    for (x) |v| {
        if (std.math.isNan(v) or std.math.isPositiveInf(v)) return false;
        m = @max(m, v);
    }
    if (std.math.isNegativeInf(m)) return false;
    var sum: f64 = 0;
    for (x) |*v| {
        const e = exp(v.* - m);
        v.* = e;
        sum += e;
    }
    const inv: f32 = @floatCast(1.0 / sum);
    const V = @Vector(lanes, f32);
    var i: usize = 0;
    if (lanes > 1) {
        while (i + lanes <= x.len) : (i += lanes) {
            const v: V = x[i..][0..lanes].*;
            x[i..][0..lanes].* = v * @as(V, @splat(inv));
        }
    }
    while (i < x.len) : (i += 1) x[i] *= inv;
    return true;
}

/// What `argmax` found.
pub const Argmax = struct {
    pub const Status = enum(u32) {
        /// `index` is the first position of the maximum.
        ok = 0,
        /// Every value is -inf (masked): no maximum; `index` is x.len.
        none = 1,
        /// x holds a NaN or +inf; `index` is the first of them.
        nonfinite = 2,
    };
    status: Status,
    index: usize,
};

/// The greedy pick over logits: the first index of the largest value (ties
/// go to the lowest index; -0 and +0 are equal), -inf values being masked
/// ones. Two passes, each `L` values at a time: the maximum (and whether any
/// value is a NaN or +inf), then the first position holding it.
pub fn argmax(x: []const f32) Argmax {
    assert(x.len > 0);
    const L = if (lanes > 1) lanes else 4;
    const V = @Vector(L, f32);
    const U = @Vector(L, u32);
    const inf = std.math.inf(f32);
    // A NaN or +inf is the one value that is not below +inf.
    const one: U = @splat(1);
    const zero: U = @splat(0);
    var vmax: V = @splat(-inf);
    var bad: U = zero;
    var i: usize = 0;
    while (i + L <= x.len) : (i += L) {
        const v: V = x[i..][0..L].*;
        bad |= @select(u32, v < @as(V, @splat(inf)), zero, one);
        // `bad` catches NaN, so the maximum need not (`vmaxps` on x86).
        vmax = maxNoNan(L, vmax, v);
    }
    var m: f32 = maxLaneNoNan(L, vmax);
    var any_bad = @reduce(.Or, bad) != 0;
    while (i < x.len) : (i += 1) {
        if (!(x[i] < inf)) any_bad = true;
        m = @max(m, x[i]);
    }
    if (any_bad) {
        for (x, 0..) |v, j| {
            if (!(v < inf)) return .{ .status = .nonfinite, .index = j };
        }
        unreachable;
    }
    if (m == -inf) return .{ .status = .none, .index = x.len };
    i = 0;
    const mv: V = @splat(m);
    while (i + L <= x.len) : (i += L) {
        const v: V = x[i..][0..L].*;
        if (@reduce(.Or, v == mv)) break;
    }
    while (i < x.len) : (i += 1) {
        if (x[i] == m) return .{ .status = .ok, .index = i };
    }
    unreachable;
}

test "argmax: the first maximum, masked -inf, NaN and +inf found, as a plain loop" {
    var prng = std.Random.DefaultPrng.init(0x5eed);
    const r = prng.random();
    var buf: [300]f32 = undefined;
    const inf = std.math.inf(f32);
    for (0..2000) |trial| {
        const n = 1 + r.uintLessThan(usize, buf.len);
        const x = buf[0..n];
        // Few distinct values, so that ties are common.
        for (x) |*v| v.* = @as(f32, @floatFromInt(r.uintLessThan(u32, 7))) - 3;
        if (trial % 3 == 0) x[r.uintLessThan(usize, n)] = -0.0;
        if (trial % 5 == 0) for (x) |*v| {
            if (r.boolean()) v.* = -inf;
        };
        if (trial % 11 == 0) @memset(x, -inf);
        if (trial % 7 == 0) x[r.uintLessThan(usize, n)] = if (r.boolean()) std.math.nan(f32) else inf;
        // The reference: the sampler's loop (strict >, NaN never larger).
        var best: ?usize = null;
        var first_bad: ?usize = null;
        var m = -inf;
        for (x, 0..) |v, j| {
            if (first_bad == null and (std.math.isNan(v) or v == inf)) first_bad = j;
            if (v > m) {
                m = v;
                best = j;
            }
        }
        const got = argmax(x);
        if (first_bad) |j| {
            try testing.expectEqual(Argmax.Status.nonfinite, got.status);
            try testing.expectEqual(j, got.index);
        } else if (best) |j| {
            try testing.expectEqual(Argmax.Status.ok, got.status);
            try testing.expectEqual(j, got.index);
        } else {
            try testing.expectEqual(Argmax.Status.none, got.status);
            try testing.expectEqual(n, got.index);
        }
    }
}

/// In-place RoPE over n_heads heads of head_dim values; the first n_rot
/// dimensions of each head rotate, the rest are left alone.
pub fn rope(x: []f32, n_heads: usize, head_dim: usize, n_rot: usize, pos: u32, inv_freq: []const f32, mode: abi.RopeMode) void {
    assert(n_rot > 0 and n_rot % 2 == 0 and n_rot <= head_dim);
    assert(x.len >= n_heads * head_dim);
    assert(inv_freq.len >= n_rot / 2);
    assert(pos <= abi.rope_max_pos);
    const half = n_rot / 2;
    const p: f32 = @floatFromInt(pos);
    for (0..half) |i| {
        const angle: f32 = p * inv_freq[i];
        const c: f32 = @floatCast(@cos(@as(f64, angle)));
        const s: f32 = @floatCast(@sin(@as(f64, angle)));
        const a, const b = switch (mode) {
            .normal => .{ 2 * i, 2 * i + 1 },
            .neox => .{ i, i + half },
        };
        for (0..n_heads) |h| {
            const base = h * head_dim;
            const x0 = x[base + a];
            const x1 = x[base + b];
            x[base + a] = x0 * c - x1 * s;
            x[base + b] = x0 * s + x1 * c;
        }
    }
}

pub const Gate = enum { silu, gelu };

/// out = act(gate) * up, act = SiLU or GELU (tanh approximation).
pub fn gatedMul(comptime gate_kind: Gate, gate: []const f32, up: []const f32, out: []f32) void {
    assert(gate.len == up.len and out.len == gate.len);
    const V = @Vector(lanes, f32);
    var i: usize = 0;
    if (lanes > 1) {
        while (i + lanes <= gate.len) : (i += lanes) {
            const g: V = gate[i..][0..lanes].*;
            const u: V = up[i..][0..lanes].*;
            out[i..][0..lanes].* = activate(V, gate_kind, g) * u;
        }
    }
    while (i < gate.len) : (i += 1) out[i] = activate(f32, gate_kind, gate[i]) * up[i];
}

inline fn splatOf(comptime T: type, v: f32) T {
    return if (T == f32) v else @splat(v);
}

inline fn activate(comptime T: type, comptime gate_kind: Gate, g: T) T {
    const one = splatOf(T, 1.0);
    switch (gate_kind) {
        // silu(g) = g * sigmoid(g). libm's expf per lane: a vectorized
        // polynomial exp was ~2% faster on SmolLM2 decode but moved the
        // teacher-forced agreement with llama.cpp from 96.3% to 94.1% (noise
        // of one ulp, amplified by Q8_0 activation rounding; see
        // tests/llamacpp_agreement_test.ts), so it is not used here.
        .silu => return g / (one + exp(-g)),
        // gelu_tanh(g) = 0.5 g (1 + tanh(z)) = g * sigmoid(2 z),
        // z = sqrt(2 / pi) * (g + 0.044715 g^3)
        .gelu => {
            const z = splatOf(T, 0.7978845608028654) * (g + splatOf(T, 0.044715) * g * g * g);
            return g / (one + exp(splatOf(T, -2.0) * z));
        },
    }
}

// ---------------------------------------------------------------------------
// Streaming read, the bandwidth yardstick for the benchmarks.
// ---------------------------------------------------------------------------

/// Reads every byte of `bytes` once (32 bytes at a time where the variant
/// allows) and returns an XOR fold so the loads cannot be elided.
pub fn streamRead(bytes: []const u8) u64 {
    // 32-byte loads, four per 128 bytes, on every variant: a 64-byte load
    // loop streamed slower on Zen 4 (bench:read-ceiling, 2 MiB pages: 34.3
    // against 37.1 GB/s at 1 thread). The fold is the XOR of every 8-byte
    // word (then the tail's bytes) whatever the load width.
    const W = @Vector(4, u64);
    var acc0: W = @splat(0);
    var acc1: W = @splat(0);
    var i: usize = 0;
    const step = 128;
    while (i + step <= bytes.len) : (i += step) {
        acc0 ^= @as(W, @bitCast(bytes[i..][0..32].*)) ^ @as(W, @bitCast(bytes[i + 32 ..][0..32].*));
        acc1 ^= @as(W, @bitCast(bytes[i + 64 ..][0..32].*)) ^ @as(W, @bitCast(bytes[i + 96 ..][0..32].*));
    }
    var r: u64 = @reduce(.Xor, acc0 ^ acc1);
    while (i < bytes.len) : (i += 1) r ^= bytes[i];
    return r;
}

// ---------------------------------------------------------------------------
// Tests: each variant against the scalar reference, on lengths hitting tails.
// ---------------------------------------------------------------------------

const testing = std.testing;

fn randomQ8Blocks(rng: std.Random, out: []BlockQ8_0, full_range: bool) void {
    for (out) |*b| {
        b.d = abi.f32ToF16(rng.float(f32) * 0.1 + 0.001);
        for (&b.qs) |*q| {
            q.* = if (full_range) rng.int(i8) else rng.intRangeAtMost(i8, -127, 127);
        }
    }
}

fn randomQ4Blocks(rng: std.Random, out: []BlockQ4_0) void {
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
fn absTermsQ8(w: []const BlockQ8_0, x: []const BlockQ8_0) f32 {
    var m: f32 = 0;
    for (w, x) |*a, *b| {
        var t: i32 = 0;
        for (a.qs, b.qs) |p, q| t += @intCast(@abs(@as(i32, p) * q));
        m += @as(f32, @floatFromInt(t)) * abi.f16ToF32(a.d) * abi.f16ToF32(b.d);
    }
    return m;
}

fn absTermsQ4(w: []const BlockQ4_0, x: []const BlockQ8_0) f32 {
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

test "float kernels against plain loops" {
    var prng = std.Random.DefaultPrng.init(7);
    const rng = prng.random();
    var x: [77]f32 = undefined;
    var w: [77]f32 = undefined;
    var out: [77]f32 = undefined;
    for (&x, &w) |*a, *b| {
        a.* = rng.floatNorm(f32) * 3;
        b.* = rng.floatNorm(f32);
    }
    for ([_]usize{ 2, 5, 16, 17, 33, 77 }) |n| {
        rmsNorm(x[0..n], w[0..n], 1e-6, out[0..n]);
        var ss: f64 = 0;
        for (x[0..n]) |v| ss += @as(f64, v) * v;
        const scale: f32 = @floatCast(1.0 / @sqrt(ss / @as(f64, @floatFromInt(n)) + 1e-6));
        for (0..n) |i| try expectClose(x[i] * scale * w[i], out[i], 1e-5);

        gatedMul(.silu, x[0..n], w[0..n], out[0..n]);
        for (0..n) |i| {
            const g: f64 = x[i];
            try expectClose(@floatCast(g / (1 + @exp(-g)) * w[i]), out[i], 1e-5);
            // Bit for bit the one-lane-at-a-time formula, vector lanes
            // (expfVec on the x86 SIMD variants) and tail alike.
            try testing.expectEqual(x[i] / (1 + exp(-x[i])) * w[i], out[i]);
        }
        gatedMul(.gelu, x[0..n], w[0..n], out[0..n]);
        for (0..n) |i| {
            const g: f64 = x[i];
            const ref = 0.5 * g * (1 + std.math.tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)));
            try expectClose(@floatCast(ref * w[i]), out[i], 1e-5);
        }
        var s: [77]f32 = x;
        s[0] = -std.math.inf(f32); // a masked entry
        try testing.expect(softmax(s[0..n]));
        try testing.expectEqual(@as(f32, 0), s[0]);
        var total: f64 = 0;
        for (s[0..n]) |v| total += v;
        try testing.expectApproxEqAbs(@as(f64, 1), total, 1e-5);
    }
}

test "rope: position 0 is the identity, norms are kept, partial rotation" {
    var x: [2 * 8]f32 = undefined;
    for (&x, 0..) |*v, i| v.* = @as(f32, @floatFromInt(i)) - 7.5;
    const inv = [_]f32{ 1.0, 0.1 };
    var y = x;
    rope(&y, 2, 8, 4, 0, &inv, .neox);
    try testing.expectEqualSlices(f32, &x, &y);
    rope(&y, 2, 8, 4, 5, &inv, .normal);
    for (0..2) |h| {
        const b = h * 8;
        // untouched tail
        try testing.expectEqualSlices(f32, x[b + 4 .. b + 8], y[b + 4 .. b + 8]);
        const n0 = x[b] * x[b] + x[b + 1] * x[b + 1];
        const m0 = y[b] * y[b] + y[b + 1] * y[b + 1];
        try expectClose(n0, m0, 1e-5);
    }
}

test "streamRead folds every byte" {
    var buf: [300]u8 = undefined;
    for (&buf, 0..) |*b, i| b.* = @truncate(i *% 31);
    var expect: u64 = 0;
    // reference: XOR of the 64-bit words of whole 128-byte steps, then tail bytes
    const whole = buf.len / 128 * 128;
    var i: usize = 0;
    while (i < whole) : (i += 8) expect ^= std.mem.readInt(u64, buf[i..][0..8], .little);
    while (i < buf.len) : (i += 1) expect ^= buf[i];
    try testing.expectEqual(expect, streamRead(&buf));
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

test "packed panels: every variant equals the one-value-at-a-time reference bit for bit, for 1..9 tokens" {
    var prng = std.Random.DefaultPrng.init(11);
    const rng = prng.random();
    inline for ([_]packing.Quant{ .q4_0, .q8_0, .q4_1, .q5_0 }) |q| {
        const ng: usize = 5;
        const n_panels: usize = 3;
        const rows: usize = 41;
        const rec = comptime packing.recordBytes(q);
        var w: [n_panels * ng * rec]u8 = undefined;
        rng.bytes(&w);
        for (0..n_panels * ng) |i| {
            for (0..16) |lane| {
                const d = abi.f32ToF16(rng.float(f32) * 0.1);
                w[i * rec + lane * 2] = @truncate(d);
                w[i * rec + lane * 2 + 1] = @truncate(d >> 8);
                if (q == .q4_1) {
                    const m = abi.f32ToF16(rng.float(f32) * 0.2 - 0.1);
                    w[i * rec + 32 + lane * 2] = @truncate(m);
                    w[i * rec + 32 + lane * 2 + 1] = @truncate(m >> 8);
                }
            }
        }
        const stride = ActRow.bytes(ng);
        var x: [9 * ActRow.bytes(5)]u8 align(64) = undefined;
        rng.bytes(&x);
        for (0..9) |t| {
            const xr = x[t * stride ..];
            var total: i32 = 0;
            for (0..ng) |g| {
                var sum: i32 = 0;
                // Activation quants are in [-127, 127], as the quantizer makes them.
                for (xr[g * 34 + 2 ..][0..32]) |*v| v.* = if (v.* == 0x80) 0x81 else v.*;
                for (0..32) |j| sum += @as(i8, @bitCast(xr[g * 34 + 2 + j]));
                std.mem.writeInt(i32, xr[ActRow.sumsOffset(ng) + g * 4 ..][0..4], sum, .little);
                const d: f32 = rng.float(f32);
                std.mem.writeInt(u32, xr[ActRow.scalesOffset(ng) + g * 4 ..][0..4], @bitCast(d), .little);
                total += sum;
            }
        }
        // With and without the in-kernel prefetch (panel_prefetch), several
        // tokens prefetching to L1 and to L2 (multi_prefetch_l2): the same bits.
        defer panel_prefetch.store(true, .monotonic);
        defer multi_prefetch_l2.store(false, .monotonic);
        for (0..2 * 9) |case| {
            panel_prefetch.store(case < 9, .monotonic);
            multi_prefetch_l2.store(case >= 9, .monotonic);
            const n_tok = case % 9 + 1;
            var y: [9 * 48]f32 = [_]f32{-1} ** (9 * 48);
            packedPanels(q, &w, n_panels, ng, &x, stride, n_tok, &y, 48, rows);
            for (0..n_tok) |t| {
                for (0..n_panels) |p| {
                    var expect: [16]f32 = undefined;
                    panelScalar(q, w[p * ng * rec ..].ptr, ng, x[t * stride ..].ptr, &expect);
                    for (0..16) |lane| {
                        const r = p * 16 + lane;
                        if (r < rows) {
                            try testing.expectEqual(expect[lane], y[t * 48 + r]);
                        } else {
                            try testing.expectEqual(@as(f32, -1), y[t * 48 + r]);
                        }
                    }
                }
            }
        }
    }
}

test "packed panels agree with the ggml-row dot on the same weights" {
    var prng = std.Random.DefaultPrng.init(12);
    const rng = prng.random();
    const cols: usize = 64;
    const ng = cols / 32;
    var blocks4: [16 * ng]BlockQ4_0 = undefined;
    randomQ4Blocks(rng, &blocks4);
    var xb: [ng]BlockQ8_0 = undefined;
    randomQ8Blocks(rng, &xb, true);
    // Source tiles of one 16 x 64 matrix, then packed.
    const run = packing.Run.one(.q4_0, 16, cols);
    var src: [packing.tileBytes(.q4_0, 16, 64)]u8 = undefined;
    @memset(src[0..16], 0);
    for (0..16) |r| {
        for (0..ng) |g| {
            const b = blocks4[r * ng + g];
            std.mem.writeInt(u16, src[16 + (r * ng + g) * 2 ..][0..2], b.d, .little);
            @memcpy(src[16 + 16 * ng * 2 + (r * ng + g) * 16 ..][0..16], &b.qs);
        }
    }
    var dst: [ng * packing.recordBytes(.q4_0)]u8 = undefined;
    packing.packPanel(&run, &src, 0, 0, &dst);
    var x: [ActRow.bytes(ng)]u8 align(64) = undefined;
    @memcpy(x[0 .. ng * 34], std.mem.sliceAsBytes(&xb));
    for (0..ng) |g| {
        var sum: i32 = 0;
        for (xb[g].qs) |v| sum += v;
        std.mem.writeInt(i32, x[ActRow.sumsOffset(ng) + g * 4 ..][0..4], sum, .little);
        std.mem.writeInt(u32, x[ActRow.scalesOffset(ng) + g * 4 ..][0..4], @bitCast(abi.f16ToF32(xb[g].d)), .little);
    }
    var y: [16]f32 = undefined;
    packedPanels(.q4_0, &dst, 1, ng, &x, x.len, 1, &y, 16, 16);
    for (0..16) |r| {
        const expect = scalar.dotQ4_0(blocks4[r * ng ..][0..ng], &xb);
        try expectCloseMag(expect, y[r], 1e-5, absTermsQ4(blocks4[r * ng ..][0..ng], &xb));
    }
}

test "Q4_1 panels agree with the Q4_1 tile stripe kernel on the same weights" {
    const bk = @import("block_kernels.zig");
    var prng = std.Random.DefaultPrng.init(13);
    const rng = prng.random();
    const rows: usize = 20;
    const cols: usize = 320; // two column tiles: 256 + 64
    const ng = cols / 32;
    // Source tiles (whole 20-byte blocks), one stripe.
    const run = packing.Run.one(.q4_1, rows, cols);
    var src: [packing.tileBytes(.q4_1, rows, 256) + packing.tileBytes(.q4_1, rows, 64)]u8 = undefined;
    rng.bytes(&src);
    var pos: usize = 0;
    for ([_]usize{ 256, 64 }) |tc| {
        for (0..rows * tc / 32) |b| {
            const at = pos + 16 + b * 20;
            std.mem.writeInt(u16, src[at..][0..2], abi.f32ToF16(rng.float(f32) * 0.1), .little);
            std.mem.writeInt(u16, src[at + 2 ..][0..2], abi.f32ToF16(rng.float(f32) * 0.2 - 0.1), .little);
        }
        pos += packing.tileBytes(.q4_1, rows, tc);
    }
    var dst: [2 * ng * packing.recordBytes(.q4_1)]u8 = undefined;
    for (0..2) |p| packing.packPanel(&run, &src, 0, p, dst[p * run.panelBytes(0) ..][0..run.panelBytes(0)]);
    var x: [ActRow.bytes(ng)]u8 align(64) = undefined;
    var xf: [cols]f32 = undefined;
    for (&xf) |*v| v.* = rng.floatNorm(f32);
    const xb: [*]BlockQ8_0 = @ptrCast(&x);
    try testing.expect(quantizeQ8_0(&xf, xb[0..ng]));
    for (0..ng) |g| {
        var sum: i32 = 0;
        for (xb[g].qs) |v| sum += v;
        std.mem.writeInt(i32, x[ActRow.sumsOffset(ng) + g * 4 ..][0..4], sum, .little);
        std.mem.writeInt(u32, x[ActRow.scalesOffset(ng) + g * 4 ..][0..4], @bitCast(abi.f16ToF32(xb[g].d)), .little);
    }
    var y_panels: [rows]f32 = undefined;
    packedPanels(.q4_1, &dst, 2, ng, &x, x.len, 1, &y_panels, rows, rows);
    var y_tiles: [rows]f32 = undefined;
    bk.blockStripe(.q4_1, &src, rows, cols, &x, x.len, 1, &y_tiles, rows);
    for (y_panels, y_tiles) |a, b| try testing.expect(@abs(a - b) <= 1e-4 * (@abs(b) + 1));
}
