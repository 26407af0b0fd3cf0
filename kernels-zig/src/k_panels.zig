//! Packed K-quant panels (packing.zig, "K records"): Q4_K and Q6_K matrices
//! repacked into 16-row panels of 256-column super-blocks, computed against
//! the plan's ActRows with the variant's panel primitive, the same one the
//! Q4_0/Q8_0 panels use (panels.zig `PanelPrim`).
//!
//! The input is Q8_K ActRows (act_q8_k.zig, the plan's `quantize_k`): one
//! activation scale dx per super-block, in each of its groups' slots, as
//! llama.cpp quantizes the activations of K-quant weights. Per row,
//! super-block and token, with `isum` the exact integer dot of a
//! sub-block's quants with the activation quants and `sx_j` the sum of
//! sub-block j's activation quants, everything up to the last two lines in
//! exact integers:
//!
//!   Q4_K: T = sum_j isum_j * sc_j, M = sum_j m_j * sx_j  (j = 0..7)
//!         acc = fma(dx * d, f32(T), acc); acc = fma(-(dx * dmin), f32(M), acc)
//!   Q6_K: T = sum over the 16 sixteen-column pieces k of isum_k * sc_k
//!         (isum over q - 32)
//!         acc = fma(dx * d, f32(T), acc)
//!
//! (|T| < 2^31: Q4_K 8 * 32 * 15 * 127 * 63, Q6_K 16 * 16 * 32 * 127 * 128;
//! |M| <= 8 * 63 * 32 * 127.) Super-blocks go left to right. Integers are
//! exact on every primitive and every float operation is the same per row whatever the vector width, so
//! every variant equals `kPanelScalar` bit for bit, for any number of tokens
//! per call (batched prefill equals token-by-token decode) and any split of
//! the panels between threads.
//!
//! Saturation (AVX2, `vpmaddubsw` pairs summed in i16 lanes): Q4_K sums 8
//! chunks of nibble pairs, at most 8 * 2 * 15 * 128 = 30,720; Q6_K
//! multiplies |q - 32| <= 32 by the activation quants given w's sign
//! (`vpsignb`) and sums 4 chunks, at most 4 * 2 * 32 * 127 = 32,512; the
//! Q4_K mins (u8 <= 63) against the bytes of the activation sums (<= 127,
//! `sumBytes`) sum 2 steps, at most 2 * 2 * 63 * 127 = 32,004: all
//! within i16, given activation quants in [-127, 127] (the quantizer clamps
//! them; the sign of -128 would not negate). The lanes add with checked
//! arithmetic, so the Debug and ReleaseSafe tests would trap on a bound
//! that did not hold.
//!
//! The tests are in k_panels_test.zig.

const std = @import("std");
const abi = @import("abi.zig");
const packing = @import("packing.zig");
const k = @import("kernels.zig");
const pn = @import("panels.zig");

const assert = std.debug.assert;
const ActRow = packing.ActRow;
const PanelPrim = pn.PanelPrim;
const V16i16 = @Vector(16, i16);

const readU32 = k.readU32;
const readF32 = k.readF32;
const readI32 = k.readI32;

inline fn f16At(p: [*]const u8) f32 {
    return abi.f16ToF32(@as(u16, p[0]) | (@as(u16, p[1]) << 8));
}

/// Tokens per weight load in a prefill batch: the register block is one
/// vector of rows by this many tokens (16 registers on the 256-bit
/// variants, 32 on AVX-512 and NEON).
pub fn kBlock(comptime prim: PanelPrim) usize {
    return switch (prim) {
        .vnni512 => 8,
        .sdot128, .smull128 => 4,
        .vnni256, .maddubs256 => 4,
    };
}

/// Integer dots of one 4-column chunk of R rows against 4 broadcast
/// activation bytes, summed over chunks in `Acc`, then multiplied by each
/// row's integer scale: the exact `isum * sc` of every row.
fn KDot(comptime prim: PanelPrim) type {
    return struct {
        pub const R: usize = switch (prim) {
            .vnni512 => 16,
            .vnni256, .maddubs256 => 8,
            .sdot128, .smull128 => 4,
        };
        pub const VB = @Vector(R * 4, u8);
        pub const VX = @Vector(R * 4, i8);
        pub const VI = @Vector(R, i32);
        /// AVX2 sums `vpmaddubsw` pairs in i16 (see the file's bounds).
        pub const Acc = if (prim == .maddubs256) V16i16 else VI;

        pub inline fn zero() Acc {
            return @splat(0);
        }

        pub inline fn broadcast(p: [*]const u8) VX {
            return broadcastWord(readU32(p));
        }

        pub inline fn broadcastWord(w: u32) VX {
            return @bitCast(@as(VI, @splat(@bitCast(w))));
        }

        /// acc + the chunk's products for unsigned weights q (< 64).
        pub inline fn stepU(acc: Acc, q: VB, x: VX) Acc {
            return switch (prim) {
                .maddubs256 => acc + k.@"llvm.x86.avx2.pmadd.ub.sw"(q, x),
                .vnni512 => k.@"llvm.x86.avx512.vpdpbusd.512"(acc, @bitCast(q), @bitCast(x)),
                .vnni256 => k.@"llvm.x86.avx512.vpdpbusd.256"(acc, @bitCast(q), @bitCast(x)),
                .sdot128 => k.@"llvm.aarch64.neon.sdot.v4i32.v16i8"(acc, @bitCast(q), x),
                .smull128 => acc + k.dot4(R, @bitCast(q), x),
            };
        }

        /// acc + the chunk's products for signed weights w in [-32, 31].
        pub inline fn stepS(acc: Acc, w: VX, x: VX) Acc {
            return switch (prim) {
                .maddubs256 => acc + k.@"llvm.x86.avx2.pmadd.ub.sw"(@bitCast(@abs(w)), k.@"llvm.x86.avx2.psign.b"(x, w)),
                .vnni512, .vnni256 => blk: {
                    const xs = @select(i8, w < @as(VX, @splat(0)), @as(VX, @splat(0)) -% x, x);
                    break :blk stepU(acc, @bitCast(@abs(w)), xs);
                },
                .sdot128 => k.@"llvm.aarch64.neon.sdot.v4i32.v16i8"(acc, w, x),
                .smull128 => acc + k.dot4(R, w, x),
            };
        }

        /// The rows' sums times their scales sc (one integer per row), exact.
        pub inline fn scaled(acc: Acc, sc: VI) VI {
            if (prim == .maddubs256) {
                // Each row's scale in both i16 halves of its dword.
                const pair: V16i16 = @bitCast((sc & @as(VI, @splat(0xffff))) | (sc << @as(@Vector(R, u5), @splat(16))));
                return k.@"llvm.x86.avx2.pmadd.wd"(acc, pair);
            }
            return acc * sc;
        }
    };
}

/// The R rows' integer scales at p (one byte per row), widened.
inline fn scalesU(comptime R: usize, p: [*]const u8) @Vector(R, i32) {
    const b: @Vector(R, u8) = p[0..R].*;
    return b;
}

inline fn scalesS(comptime R: usize, p: [*]const u8) @Vector(R, i32) {
    const b: @Vector(R, i8) = @bitCast(p[0..R].*);
    return b;
}

/// Keeps the compiler from merging the loads of one piece with the next
/// one's (the two nibbles of a Q4_K chunk, the quadrants of a Q6_K one) and
/// computing both at once: that holds twice the accumulators and spilled
/// them to the stack (perf: a third of the kernel's instructions).
inline fn pieceBarrier() void {
    if (@import("builtin").cpu.arch.isX86() or @import("builtin").cpu.arch.isAARCH64()) asm volatile ("" ::: "memory");
}

/// The bytes of a super-block's eight activation sums sx_j (|sx_j| <= 32 *
/// 127 = 4064) split as sx_j = 128 hi_j + lo_j: lo_j in 0..127 and hi_j in
/// -32..31, four sub-blocks per word (byte j % 4 of word j / 4).
const SumBytes = struct { lo: [2]u32, hi: [2]u32 };

inline fn sumBytes(p: [*]const u8) SumBytes {
    comptime assert(@import("builtin").cpu.arch.endian() == .little);
    const V8 = @Vector(8, i32);
    const sv: V8 = @bitCast(p[0..32].*);
    assert(@reduce(.And, sv <= @as(V8, @splat(4064))) and @reduce(.And, sv >= @as(V8, @splat(-4064))));
    const lo: @Vector(8, u8) = @truncate(@as(@Vector(8, u32), @bitCast(sv & @as(V8, @splat(127)))));
    const hi: @Vector(8, i8) = @truncate(sv >> @as(@Vector(8, u5), @splat(7)));
    return .{ .lo = @bitCast(lo), .hi = @bitCast(hi) };
}

/// The sum of the activation quants of one 16-column half of group g of the
/// Q8_K ActRow at xr: the first half's is the i16 in the group's block
/// header (act_q8_k.zig), the second half's the group's sum less it.
inline fn halfSum(xr: [*]const u8, su: usize, g: usize, comptime half: usize) i32 {
    const first: i32 = @as(i16, @bitCast(@as(u16, xr[g * abi.q8_0_block_bytes]) | (@as(u16, xr[g * abi.q8_0_block_bytes + 1]) << 8)));
    assert(first >= -16 * 127 and first <= 16 * 127);
    return if (half == 0) first else readI32(xr + su + g * 4) - first;
}

inline fn f16s(comptime R: usize, p: [*]const u8) @Vector(R, f32) {
    const h: @Vector(R, f16) = @bitCast(p[0 .. R * 2].*);
    return @floatCast(h);
}

/// Decode streams the panels from memory, one record after another: one
/// token reads each record once, and the hardware prefetchers alone kept a
/// thread at 8.1-8.8 GB/s where a plain load loop reads 11-12 (a 512 MB
/// matrix, 1 thread, Ice Lake). Touching the record this many records ahead
/// (7-10 KB) brought Q4_K to 11.3-11.8 GB/s and Q6_K to 10.9-11.3 (2 ahead:
/// Q4_K only; 6 and 10: less).
const prefetch_records: usize = 3;
/// The same for several tokens prefetching to L2 (`multi_prefetch_l2`, panel_prefetch.zig).
const prefetch_records_l2: usize = 2;

/// NT tokens against one Q4_K or Q6_K panel of `n_sb` super-blocks:
/// out[j][r] = row r . x_j for the 16 rows.
/// `stream`: the panel comes from memory (the first token block over it),
/// so the kernel prefetches ahead, up to `end`, the end of the call's panels.
pub inline fn kPanelSimd(comptime prim: PanelPrim, comptime q: packing.Quant, comptime NT: usize, panel: [*]const u8, n_sb: usize, stream: bool, end: [*]const u8, x: [*]const u8, x_stride: usize, out: *[NT][16]f32) void {
    @setEvalBranchQuota(200000);
    const D = KDot(prim);
    const R = D.R;
    const H = 16 / R;
    const VF = @Vector(R, f32);
    const VB = D.VB;
    const VX = D.VX;
    const rec = comptime packing.recordBytes(q);
    const ng = n_sb * 8;
    const so = ActRow.scalesOffset(ng);
    const su = ActRow.sumsOffset(ng);
    const lo4: VB = @splat(0x0f);
    const sh = struct {
        inline fn r(v: VB, comptime n: u3) VB {
            return v >> @as(@Vector(R * 4, u3), @splat(n));
        }
        inline fn l(v: VB, comptime n: u3) VB {
            return v << @as(@Vector(R * 4, u3), @splat(n));
        }
    };
    // One token streams the panel from memory: every half of a 64-byte
    // chunk is used at once (one activation broadcast for all of them, each
    // cache line used whole while in L1). Several tokens read the panel from
    // cache: one half of the rows at a time over all super-blocks, so that
    // their accumulators fit the registers. A row's arithmetic is the same.
    const halves_outside = NT > 1 and H > 1;
    const HO = if (halves_outside) H else 1;
    const HI = if (halves_outside) 1 else H;
    // The first block of several tokens over a panel streams it from
    // memory too, but spends several times as long on each record: its
    // prefetches are spread over the record's sub-blocks (Q4_K) or
    // quarters (Q6_K), where one burst per record left memory and the
    // dot products taking turns (a 512 MB matrix, 1 thread, Ice Lake: 8
    // tokens Q4_K 82 -> 66-68 ms, Q6_K 91 -> 63-66; the load alone 44-47).
    const spread = NT > 1;
    const to_l2 = spread and stream and pn.multi_prefetch_l2.load(.monotonic);
    inline for (0..HO) |ho| {
        var acc: [NT][HI]VF = @splat(@splat(@splat(0)));
        for (0..n_sb) |sb| {
            const r = panel + sb * rec;
            const g0 = sb * 8;
            // One record, `prefetch_records` ahead, while it lies in this
            // call's panels (the next panel's first records too).
            if (stream and ho == 0 and !spread) pn.prefetchRecord(rec, prefetch_records, r, end);
            // One sub-block (Q4_K) or sixteen-column piece (Q6_K) at a time:
            // its integer dots for every token, then times its scale into
            // the super-block's integer total, so that the registers hold
            // one accumulator per token for the piece, the totals and acc.
            switch (q) {
                .q4_k => {
                    var t_sc: [NT][HI]D.VI = @splat(@splat(@splat(0)));
                    inline for (0..8) |sj| {
                        const l = sj / 2;
                        if (spread and stream and ho == 0) pn.prefetchSeveral(to_l2, rec, prefetch_records, prefetch_records_l2, 8, sj, r, end);
                        pieceBarrier();
                        var isum: [NT][HI]D.Acc = @splat(@splat(D.zero()));
                        inline for (0..8) |c| {
                            inline for (0..HI) |hi| {
                                const row0 = (ho + hi) * R;
                                const wv: VB = r[packing.k4_q + (l * 8 + c) * 64 + row0 * 4 ..][0 .. R * 4].*;
                                const wq = if (sj % 2 == 0) wv & lo4 else sh.r(wv, 4);
                                inline for (0..NT) |j| {
                                    const qs = x + j * x_stride + g0 * abi.q8_0_block_bytes + 2;
                                    isum[j][hi] = D.stepU(isum[j][hi], wq, D.broadcast(qs + sj * abi.q8_0_block_bytes + 4 * c));
                                }
                            }
                        }
                        inline for (0..HI) |hi| {
                            const sc = scalesU(R, r + packing.k4_sc + sj * 16 + (ho + hi) * R);
                            inline for (0..NT) |j| t_sc[j][hi] += D.scaled(isum[j][hi], sc);
                        }
                    }
                    // The mins: M = sum_j m_j sx_j as integer dots of each
                    // row's four mins per lane with the sums' bytes
                    // (sx = 128 hi + lo, lo in 0..127, hi in -32..31).
                    inline for (0..HI) |hi| {
                        const row0 = (ho + hi) * R;
                        const d = f16s(R, r + packing.k4_d + row0 * 2);
                        const dmin = f16s(R, r + packing.k4_dmin + row0 * 2);
                        const mq0: VB = r[packing.k4_m + row0 * 4 ..][0 .. R * 4].*;
                        const mq1: VB = r[packing.k4_m + 64 + row0 * 4 ..][0 .. R * 4].*;
                        inline for (0..NT) |j| {
                            const xr = x + j * x_stride;
                            const b = sumBytes(xr + su + g0 * 4);
                            var ml = D.stepU(D.zero(), mq0, D.broadcastWord(b.lo[0]));
                            ml = D.stepU(ml, mq1, D.broadcastWord(b.lo[1]));
                            var mh = D.stepU(D.zero(), mq0, D.broadcastWord(b.hi[0]));
                            mh = D.stepU(mh, mq1, D.broadcastWord(b.hi[1]));
                            const t_m = D.scaled(mh, @splat(128)) + D.scaled(ml, @splat(1));
                            const dx: VF = @splat(readF32(xr + so + g0 * 4));
                            acc[j][hi] = @mulAdd(VF, dx * d, @floatFromInt(t_sc[j][hi]), acc[j][hi]);
                            acc[j][hi] = @mulAdd(VF, -(dx * dmin), @floatFromInt(t_m), acc[j][hi]);
                        }
                    }
                },
                .q6_k => {
                    // VNNI multiplies unsigned by signed bytes. One token
                    // (decode, where this kernel is bound by its operations
                    // per weight), and up to 4 on AVX-512, take the quants q
                    // in 0..63 as they are and start each piece's sum at -32
                    // times the piece's activation sum (the ActRow's per-16
                    // sums, act_q8_k.zig): one dot product per chunk and
                    // token. More tokens take x + 128 (x XOR 0x80, one
                    // operation per token) by the signed weight w = q - 32,
                    // and take 128 times the rows' scaled weight sums (shared
                    // by every token) off once per super-block: T = T' - 128
                    // sum_k sc_k sum(w_k) (|T'| <= 16 * 16 * 32 * 255 * 128 <
                    // 2^31); with the per-16 sums 8 tokens held more
                    // registers than there are (Zen 4, 8 rows of a
                    // speculative check: 58.6 ms against 51.3; 2 to 4 rows
                    // 10-15% faster unsigned). Both are exact, so both give
                    // the same T. The other primitives multiply w by x
                    // directly (AVX2 through the sign trick, whose pairs must
                    // stay within i16).
                    const vnni = comptime (prim == .vnni512 or prim == .vnni256);
                    const unsigned_q = comptime vnni and (NT == 1 or (prim == .vnni512 and NT <= 4));
                    const xor_signed = comptime vnni and !unsigned_q;
                    var t6: [NT][HI]D.VI = @splat(@splat(@splat(0)));
                    var tw: [HI]D.VI = @splat(@splat(0));
                    inline for (0..2) |n| {
                        inline for (0..4) |quad| {
                            inline for (0..2) |half| {
                                if (spread and stream and ho == 0 and half == 0 and quad % 2 == 0) pn.prefetchSeveral(to_l2, rec, prefetch_records, prefetch_records_l2, 4, n * 2 + quad / 2, r, end);
                                pieceBarrier();
                                var isum: [NT][HI]D.Acc = @splat(@splat(D.zero()));
                                var wsum: [HI]D.VI = @splat(@splat(0));
                                inline for (0..4) |cc| {
                                    const c = half * 4 + cc;
                                    inline for (0..HI) |hi| {
                                        const row0 = (ho + hi) * R;
                                        // Piece A holds quadrants 0 and 2, B 1 and 3; H the top bits.
                                        const at = packing.k6_q + (n * 8 + c) * 3 * 64 + row0 * 4;
                                        const pv: VB = r[at + (quad & 1) * 64 ..][0 .. R * 4].*;
                                        const hv: VB = r[at + 128 ..][0 .. R * 4].*;
                                        const three: VB = @splat(3);
                                        const low = if (quad < 2) pv & lo4 else sh.r(pv, 4);
                                        const qv = low | sh.l(sh.r(hv, 2 * quad) & three, 4);
                                        const w = @as(VX, @bitCast(qv)) -% @as(VX, @splat(32));
                                        if (xor_signed) wsum[hi] = D.stepU(wsum[hi], @splat(1), w);
                                        inline for (0..NT) |j| {
                                            const qs = x + j * x_stride + g0 * abi.q8_0_block_bytes + 2;
                                            const xb = D.broadcast(qs + (4 * n + quad) * abi.q8_0_block_bytes + 4 * c);
                                            isum[j][hi] = if (unsigned_q)
                                                D.stepU(isum[j][hi], qv, xb)
                                            else if (xor_signed)
                                                D.stepU(isum[j][hi], @as(VB, @bitCast(xb)) ^ @as(VB, @splat(0x80)), w)
                                            else
                                                D.stepS(isum[j][hi], w, xb);
                                        }
                                    }
                                }
                                inline for (0..HI) |hi| {
                                    const sc = scalesS(R, r + packing.k6_sc + (8 * n + 2 * quad + half) * 16 + (ho + hi) * R);
                                    if (xor_signed) tw[hi] += wsum[hi] * sc;
                                    inline for (0..NT) |j| {
                                        if (unsigned_q) {
                                            const hs = halfSum(x + j * x_stride, su, g0 + 4 * n + quad, half);
                                            isum[j][hi] += @as(D.VI, @splat(-32 * hs));
                                        }
                                        t6[j][hi] += D.scaled(isum[j][hi], sc);
                                    }
                                }
                            }
                        }
                    }
                    inline for (0..HI) |hi| {
                        const d = f16s(R, r + packing.k6_d + (ho + hi) * R * 2);
                        inline for (0..NT) |j| {
                            const t = if (xor_signed) t6[j][hi] - tw[hi] * @as(D.VI, @splat(128)) else t6[j][hi];
                            const dx: VF = @splat(readF32(x + j * x_stride + so + g0 * 4));
                            acc[j][hi] = @mulAdd(VF, dx * d, @floatFromInt(t), acc[j][hi]);
                        }
                    }
                },
                else => comptime unreachable,
            }
        }
        inline for (0..NT) |j| {
            inline for (0..HI) |hi| out[j][(ho + hi) * R ..][0..R].* = acc[j][hi];
        }
    }
}

/// The same arithmetic one value at a time: the scalar variant, and the
/// reference every SIMD path is held to bit for bit.
pub fn kPanelScalar(comptime q: packing.Quant, panel: [*]const u8, n_sb: usize, x: [*]const u8, out: *[16]f32) void {
    const rec = packing.recordBytes(q);
    const ng = n_sb * 8;
    const so = ActRow.scalesOffset(ng);
    const su = ActRow.sumsOffset(ng);
    for (0..16) |lane| {
        var acc: f32 = 0;
        for (0..n_sb) |sb| {
            const r = panel + sb * rec;
            // Q8_K rows: one scale per super-block, in each group's slot.
            const dx = readF32(x + so + sb * 8 * 4);
            switch (q) {
                .q4_k => {
                    var t_sc: i32 = 0;
                    var t_m: i32 = 0;
                    for (0..8) |j| {
                        const g = sb * 8 + j;
                        const qs = x + g * abi.q8_0_block_bytes + 2;
                        var isum: i32 = 0;
                        for (0..32) |i| {
                            const byte = r[packing.k4_q + ((j / 2) * 8 + i / 4) * 64 + lane * 4 + i % 4];
                            const nib: i32 = if (j % 2 == 0) byte & 15 else byte >> 4;
                            isum += nib * @as(i32, @as(i8, @bitCast(qs[i])));
                        }
                        t_sc += isum * @as(i32, r[packing.k4_sc + j * 16 + lane]);
                        t_m += @as(i32, r[packing.k4MinAt(j, lane)]) * readI32(x + su + g * 4);
                    }
                    acc = @mulAdd(f32, dx * f16At(r + packing.k4_d + lane * 2), @floatFromInt(t_sc), acc);
                    acc = @mulAdd(f32, -(dx * f16At(r + packing.k4_dmin + lane * 2)), @floatFromInt(t_m), acc);
                },
                .q6_k => {
                    var t: i32 = 0;
                    for (0..8) |j| {
                        const n = j / 4;
                        const quad = j % 4;
                        const g = sb * 8 + j;
                        const qs = x + g * abi.q8_0_block_bytes + 2;
                        for (0..2) |half| {
                            var isum: i32 = 0;
                            for (0..16) |ii| {
                                const i = half * 16 + ii;
                                const at = packing.k6_q + (n * 8 + i / 4) * 3 * 64 + lane * 4 + i % 4;
                                const ql = r[at + (quad & 1) * 64];
                                const qh = r[at + 128];
                                const low: i32 = if (quad < 2) ql & 15 else ql >> 4;
                                const high: i32 = (qh >> @intCast(2 * quad)) & 3;
                                isum += (low + 16 * high - 32) * @as(i32, @as(i8, @bitCast(qs[i])));
                            }
                            const sc: i32 = @as(i8, @bitCast(r[packing.k6_sc + (8 * n + 2 * quad + half) * 16 + lane]));
                            t += isum * sc;
                        }
                    }
                    acc = @mulAdd(f32, dx * f16At(r + packing.k6_d + lane * 2), @floatFromInt(t), acc);
                },
                else => unreachable,
            }
        }
        out[lane] = acc;
    }
}

/// The K panel kernels of `n_sb` super-blocks, for panels.zig's panelTokens.
fn KPanels(comptime q: packing.Quant) type {
    return struct {
        n_sb: usize,
        end: [*]const u8,
        pub const block: usize = if (pn.panel_prim) |prim| kBlock(prim) else 1;
        pub inline fn simd(self: @This(), comptime NT: usize, stream: bool, panel: [*]const u8, x: [*]const u8, x_stride: usize, out: *[NT][16]f32) void {
            kPanelSimd(pn.panel_prim.?, q, NT, panel, self.n_sb, stream, self.end, x, x_stride, out);
        }
        pub inline fn scalar(self: @This(), panel: [*]const u8, x: [*]const u8, out: *[16]f32) void {
            kPanelScalar(q, panel, self.n_sb, x, out);
        }
    };
}

/// packedPanels for the K records (panels.zig dispatches here): panels
/// [0, n_panels) of `ng / 8` super-blocks against tokens [0, n_tok).
pub fn kPanels(comptime q: packing.Quant, w: [*]const u8, n_panels: usize, ng: usize, x: [*]const u8, x_stride: usize, n_tok: usize, y: [*]f32, y_stride: usize, rows: usize) void {
    @setEvalBranchQuota(200000);
    assert(ng % 8 == 0 and ng >= 8);
    const n_sb = ng / 8;
    const K = KPanels(q);
    const pb = n_sb * packing.recordBytes(q);
    pn.panelTokens(K, K{ .n_sb = n_sb, .end = w + n_panels * pb }, w, pb, n_panels, x, x_stride, n_tok, y, y_stride, rows);
}
