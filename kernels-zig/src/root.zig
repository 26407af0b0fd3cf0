//! libcflow_kernels: the C ABI that Deno binds with `Deno.dlopen`.
//!
//! Every export validates what it is given (null pointers, lengths against
//! the sizes they must hold, alignment, ranges) and returns a status code
//! from `abi.Status`; only then does it call the selected variant's kernel.
//! The TypeScript wrappers in ffi/ check the same things first: both sides
//! check, neither trusts the other.

const std = @import("std");
const builtin = @import("builtin");
const abi = @import("abi.zig");
const plan = @import("plan.zig");
const Table = @import("table.zig").Table;

/// The wasm32 build (`zig build wasm`) compiles this same root with three
/// stand-ins: no cpuid (cpu_wasm.zig), no threads (pool_wasm.zig), regions
/// in linear memory instead of mmap (memory_wasm.zig). Every export keeps
/// its name, checks and status codes.
pub const is_wasm = builtin.cpu.arch == .wasm32;
const cpu = switch (builtin.cpu.arch) {
    .wasm32 => @import("cpu_wasm.zig"),
    .aarch64 => @import("cpu_arm.zig"),
    else => @import("cpu.zig"),
};
const memory = if (is_wasm) @import("memory_wasm.zig") else @import("memory.zig");
const pool_mod = if (is_wasm) @import("pool_wasm.zig") else @import("pool.zig");
/// Direct reads and staging (io.zig): native only; the wasm32 build exports
/// the same symbols returning `unsupported`.
const io = if (is_wasm) struct {} else @import("io.zig");
/// Explicit prefetch (claim 6): native only.
const prefetch = if (is_wasm) struct {} else @import("prefetch.zig");
/// /proc/self sizes for cf_peak_rss and cf_memory_usage: native only.
const proc_status = if (is_wasm) struct {} else @import("proc_status.zig");

const assert = std.debug.assert;
const Status = abi.Status;
const qk = abi.qk;

/// The variant objects this build links (abi.variantsOf its architecture;
/// wasm32 links the scalar object only).
const linked = abi.variantsOf(builtin.cpu.arch);
const max_variant_id = blk: {
    var m: u32 = 0;
    for (std.enums.values(abi.Variant)) |v| m = @max(m, @intFromEnum(v));
    break :blk m;
};

/// Indexed by variant id - 1; null for a variant of another architecture.
const tables: [max_variant_id]?Table = blk: {
    var t: [max_variant_id]?Table = @splat(null);
    for (linked) |v| t[@intFromEnum(v) - 1] = Table.bind(@tagName(v));
    break :blk t;
};

var init_lock: std.Thread.Mutex = .{};
/// Held while a job runs on the pool; a second concurrent caller (a
/// nonblocking FFI call) runs its job on its own thread instead.
var pool_lock: std.Thread.Mutex = .{};
var pool: pool_mod.Pool = .{};
var active: std.atomic.Value(u32) = .init(0);

pub fn table() ?*const Table {
    const v = active.load(.acquire);
    if (v == 0) return null;
    return &(tables[v - 1].?);
}

pub fn ok() i32 {
    return Status.ok.code();
}

// ---------------------------------------------------------------------------
// Argument checks
// ---------------------------------------------------------------------------

pub const CheckError = error{ InvalidArg, Length, Alignment, Overflow };

pub fn statusOf(e: CheckError) i32 {
    return switch (e) {
        error.InvalidArg => Status.invalid_arg.code(),
        error.Length => Status.length.code(),
        error.Alignment => Status.alignment.code(),
        error.Overflow => Status.overflow.code(),
    };
}

/// A typed many-pointer from an untyped one, after checking it is non-null
/// and aligned for T.
pub fn typed(comptime T: type, p: ?*const anyopaque) CheckError![*]const T {
    const raw = p orelse return error.InvalidArg;
    if (@intFromPtr(raw) % @alignOf(T) != 0) return error.Alignment;
    return @ptrCast(@alignCast(raw));
}

pub fn typedMut(comptime T: type, p: ?*anyopaque) CheckError![*]T {
    const raw = p orelse return error.InvalidArg;
    if (@intFromPtr(raw) % @alignOf(T) != 0) return error.Alignment;
    return @ptrCast(@alignCast(raw));
}

pub fn mul(a: usize, b: usize) CheckError!usize {
    return std.math.mul(usize, a, b) catch error.Overflow;
}

/// Blocks in n elements; n must be a positive multiple of 32.
pub fn blocksOf(n: usize) CheckError!usize {
    if (n == 0) return error.InvalidArg;
    if (n % qk != 0) return error.Length;
    return n / qk;
}

pub fn need(have: usize, want: usize) CheckError!void {
    if (have < want) return error.Length;
}

// ---------------------------------------------------------------------------
// Library lifecycle and introspection
// ---------------------------------------------------------------------------

/// uint32_t cf_abi_version(void)
export fn cf_abi_version() u32 {
    return abi.abi_version;
}

const build_info = std.fmt.comptimePrint("zig {s}; {s}; {s}-{s}-{s}", .{
    builtin.zig_version_string,
    @tagName(builtin.mode),
    @tagName(builtin.cpu.arch),
    @tagName(builtin.os.tag),
    @tagName(builtin.abi),
});

/// size_t cf_build_info(uint8_t *buf, size_t len): copies up to len bytes of
/// a description of the build; returns its full length.
export fn cf_build_info(buf: ?[*]u8, len: usize) usize {
    if (buf) |b| {
        const n = @min(len, build_info.len);
        @memcpy(b[0..n], build_info[0..n]);
    }
    return build_info.len;
}

/// size_t cf_cpu_model(uint8_t *buf, size_t len): copies up to len bytes of
/// the CPU's brand string; returns its full length.
export fn cf_cpu_model(buf: ?[*]u8, len: usize) usize {
    var storage: [48]u8 = undefined;
    const name = cpu.brand(&storage);
    if (buf) |b| {
        const n = @min(len, name.len);
        @memcpy(b[0..n], name[0..n]);
    }
    return name.len;
}

/// uint64_t cf_cpu_features(void): feature bits of this CPU (cpu.Feature).
export fn cf_cpu_features() u64 {
    return cpu.detect();
}

/// int32_t cf_variant_supported(uint32_t variant, uint64_t disable_mask)
export fn cf_variant_supported(variant: u32, disable_mask: u64) i32 {
    const v = std.meta.intToEnum(abi.Variant, variant) catch return Status.invalid_arg.code();
    return @intFromBool(cpu.supports(cpu.detect() & ~disable_mask, v));
}

/// uint64_t cf_peak_rss(void): the process's peak resident set in bytes
/// (VmHWM of /proc/self/status; getrusage's ru_maxrss where that cannot be
/// read), 0 if unavailable. Deno cannot read /proc/self without full
/// permissions, so the library reports it. ru_maxrss alone is wrong for a
/// child process: Linux carries it over from the parent at fork and exec,
/// so a small child of a large parent reported the parent's peak.
export fn cf_peak_rss() u64 {
    if (is_wasm) return 0; // the host reports it (ffi/wasm_backend.ts)
    var hwm: [1]u64 = undefined;
    if (proc_status.readKb("/proc/self/status", &.{"VmHWM:"}, &hwm)) return hwm[0];
    const usage = std.posix.getrusage(std.posix.rusage.SELF);
    if (usage.maxrss <= 0) return 0;
    return @as(u64, @intCast(usage.maxrss)) * 1024;
}

/// int32_t cf_memory_usage(uint64_t out[4]): RSS, PSS, Pss_File and
/// Pss_Anon of this process in bytes, from /proc/self/smaps_rollup (which
/// Deno cannot read without full permissions). 0, or a status when the file
/// cannot be read (not Linux, no smaps_rollup) or lacks a field.
export fn cf_memory_usage(out: ?[*]u8, out_len: usize) i32 {
    if (is_wasm) return Status.unsupported.code();
    const dst = out orelse return Status.invalid_arg.code();
    if (out_len != 32) return Status.length.code();
    var values: [4]u64 = undefined;
    if (!proc_status.readKb("/proc/self/smaps_rollup", &.{ "Rss:", "Pss:", "Pss_File:", "Pss_Anon:" }, &values)) {
        return Status.unsupported.code();
    }
    for (values, 0..) |v, i| std.mem.writeInt(u64, dst[i * 8 ..][0..8], v, .little);
    return Status.ok.code();
}

/// int32_t cf_trim_heap(void): hands the free pages of every C heap arena
/// back to the OS (glibc's `malloc_trim(0)`): 1 if any were released, 0 if
/// none, `unsupported` where the C library has no malloc_trim (wasm, not
/// glibc). A model's load frees what it built from (the file's metadata,
/// conversion and packing temporaries of the runtime); glibc keeps freed
/// pages of a thread's arena resident until asked.
export fn cf_trim_heap() i32 {
    if (comptime is_wasm or !builtin.target.isGnuLibC()) return Status.unsupported.code();
    const libc = struct {
        extern "c" fn malloc_trim(pad: usize) c_int;
    };
    return @intFromBool(libc.malloc_trim(0) != 0);
}

/// int32_t cf_set_prefetch(uint32_t on): turns the explicit prefetch thread
/// on (1: plans post the next matrix and the next selected expert to it) or
/// off (0). Off by default; unsupported (-5) in the wasm build.
export fn cf_set_prefetch(on: u32) i32 {
    if (is_wasm) return Status.unsupported.code();
    if (on > 1) return Status.invalid_arg.code();
    prefetch.setEnabled(on == 1);
    return Status.ok.code();
}

/// How one-token panel kernels prefetch (cf_set_panel_prefetch): 0 as the CPU
/// suggests, 1 always, 2 never. Applied by cf_init and by the setter.
var panel_prefetch_mode: u32 = 0;

/// Sets every linked variant's panel prefetch from `panel_prefetch_mode`;
/// returns whether it is on. Called under init_lock.
fn applyPanelPrefetch() bool {
    const on = switch (panel_prefetch_mode) {
        0 => cpu.panelPrefetchPays(),
        1 => true,
        else => false,
    };
    // Several tokens prefetch by the vendor whatever the mode (to L2 on AMD).
    const bits = @as(u32, @intFromBool(on)) | (@as(u32, @intFromBool(cpu.isAmd())) << 1);
    for (linked) |v| tables[@intFromEnum(v) - 1].?.set_panel_prefetch(bits);
    return on;
}

/// int32_t cf_set_panel_prefetch(uint32_t mode): whether one-token panel
/// kernels prefetch ahead of the panels they stream (panels.zig
/// `panel_prefetch`; several tokens always do, to L2 on AMD and to L1
/// elsewhere: `multi_prefetch_l2`): 0 as the CPU suggests (off on AMD, on elsewhere), 1 on, 2 off. Returns 1
/// or 0, the state now in force, or a status. Kept across cf_init; no kernel
/// may run concurrently with it.
export fn cf_set_panel_prefetch(mode: u32) i32 {
    if (mode > 2) return Status.invalid_arg.code();
    init_lock.lock();
    defer init_lock.unlock();
    panel_prefetch_mode = mode;
    return @intFromBool(applyPanelPrefetch());
}

/// uint32_t cf_physical_cores(void)
export fn cf_physical_cores() u32 {
    return cpu.physicalCores();
}

/// int32_t cf_init(uint32_t variant, uint32_t threads, uint64_t disable_mask)
///
/// variant: 0 = best for this CPU, else an abi.Variant. threads: 0 = the
/// physical core count. disable_mask: feature bits to treat as absent.
/// Returns the active variant (> 0) or a status code. May be called again
/// to change either; no kernel may run concurrently with it.
export fn cf_init(variant: u32, threads: u32, disable_mask: u64) i32 {
    init_lock.lock();
    defer init_lock.unlock();
    const features = cpu.detect() & ~disable_mask;
    const chosen: abi.Variant = if (variant == 0)
        cpu.best(features)
    else
        std.meta.intToEnum(abi.Variant, variant) catch return Status.invalid_arg.code();
    if (!cpu.supports(features, chosen)) return Status.unsupported.code();
    const n_threads: u32 = if (threads == 0) @min(cpu.physicalCores(), pool_mod.max_threads) else threads;
    if (n_threads > pool_mod.max_threads) return Status.limit.code();

    pool_lock.lock();
    defer pool_lock.unlock();
    if (pool.threads() != n_threads) {
        pool.stop();
        pool.start(n_threads) catch {
            pool.stop();
            active.store(0, .release);
            return Status.no_memory.code();
        };
    }
    _ = applyPanelPrefetch();
    active.store(@intFromEnum(chosen), .release);
    return @intCast(@intFromEnum(chosen));
}

/// uint32_t cf_variant(void): the active variant, 0 before cf_init.
export fn cf_variant() u32 {
    return active.load(.acquire);
}

/// uint32_t cf_threads(void)
export fn cf_threads() u32 {
    return pool.threads();
}

/// void cf_shutdown(void): stops the workers; cf_init starts them again.
export fn cf_shutdown() void {
    init_lock.lock();
    defer init_lock.unlock();
    pool_lock.lock();
    defer pool_lock.unlock();
    pool.stop();
    if (!is_wasm) io.shutdown();
    if (!is_wasm) prefetch.shutdown();
    active.store(0, .release);
}

/// Runs when the library is unloaded (Deno closes a library when the
/// program that opened it ends, e.g. between test modules) and at process
/// exit: the pool's workers run this library's code, so they are stopped
/// and joined before it is unmapped. A worker left spinning would jump into
/// unmapped memory (SIGSEGV).
fn unload() callconv(.c) void {
    cf_shutdown();
}

comptime {
    if (!is_wasm) {
        const entry: *const fn () callconv(.c) void = &unload;
        @export(&entry, .{ .name = "cflow_unload_entry", .section = ".fini_array", .linkage = .strong, .visibility = .hidden });
    }
}

pub fn runPooled(job: pool_mod.Job) void {
    if (pool_lock.tryLock()) {
        defer pool_lock.unlock();
        pool.run(job);
    } else {
        job.run(job.ctx, 0, job.items);
    }
}

// ---------------------------------------------------------------------------
// Single kernels, tiled matrices and attention (root_kernels.zig)
// ---------------------------------------------------------------------------

comptime {
    // Its exports are part of this ABI; the import makes them analyzed.
    _ = @import("root_kernels.zig");
}

// ---------------------------------------------------------------------------
// Plans: a forward pass per call (plan.zig)
// ---------------------------------------------------------------------------

fn words(p: ?*const anyopaque, n: usize) CheckError![]const u32 {
    const w = try typed(u32, p);
    return w[0..n];
}

/// int32_t cf_plan_create(int32_t workspace, const uint32_t *ops, size_t ops_words,
///     const uint32_t *runs, size_t runs_words, uint32_t max_tokens, uint32_t context,
///     uint32_t where[2])
///
/// Checks and stores a plan (see plan.zig for the encoding); returns its
/// handle (> 0) or a status code, with `where` naming the refused run
/// ({1, index}) or operation ({2, index}). Pins the workspace and every
/// run's region.
export fn cf_plan_create(workspace: i32, ops: ?*const anyopaque, ops_words: usize, runs: ?*const anyopaque, runs_words: usize, max_tokens: u32, context: u32, where_raw: ?*anyopaque) i32 {
    const where: *[2]u32 = @ptrCast(typedMut(u32, where_raw) catch |e| return statusOf(e));
    if (ops_words == 0 or ops_words > plan.max_ops * plan.op_words) return Status.invalid_arg.code();
    if (runs_words > plan.max_runs * plan.run_words) return Status.invalid_arg.code();
    const o = words(ops, ops_words) catch |e| return statusOf(e);
    const r: []const u32 = if (runs_words == 0) &.{} else words(runs, runs_words) catch |e| return statusOf(e);
    return plan.create(workspace, o, r, max_tokens, context, where);
}

/// int32_t cf_plan_run(int32_t plan, const uint32_t *tokens, size_t n_tokens, uint32_t pos,
///     uint32_t single_thread)
///
/// Runs the plan for tokens at positions [pos, pos + n_tokens), on the pool,
/// or on the calling thread alone when single_thread is 1 (where one thread
/// decodes faster than the pool: results are identical either way).
export fn cf_plan_run(handle: i32, tokens: ?*const anyopaque, n_tokens: usize, pos: u32, single_thread: u32) i32 {
    const t = table() orelse return Status.not_initialized.code();
    if (n_tokens == 0 or n_tokens > plan.max_batch) return Status.invalid_arg.code();
    if (single_thread > 1) return Status.invalid_arg.code();
    const toks = words(tokens, n_tokens) catch |e| return statusOf(e);
    if (single_thread == 1) return plan.run(.{ .t = t, .run = &runInline }, handle, toks, pos);
    return plan.run(.{ .t = t, .run = &runPooled, .threads = pool.threads() }, handle, toks, pos);
}

/// int32_t cf_plan_run_ops(int32_t plan, const uint32_t *tokens, size_t n_tokens, uint32_t pos,
///     uint32_t first, uint32_t last)
///
/// Runs operations [first, last) of the plan (last is clamped to the plan's
/// operation count) on the pool; a profiler times consecutive ranges.
export fn cf_plan_run_ops(handle: i32, tokens: ?*const anyopaque, n_tokens: usize, pos: u32, first: u32, last: u32) i32 {
    const t = table() orelse return Status.not_initialized.code();
    if (n_tokens == 0 or n_tokens > plan.max_batch) return Status.invalid_arg.code();
    const toks = words(tokens, n_tokens) catch |e| return statusOf(e);
    return plan.runOps(.{ .t = t, .run = &runPooled, .threads = pool.threads() }, handle, toks, pos, first, last);
}

/// int32_t cf_plan_run_rows(int32_t plan, const uint32_t *tokens, size_t n_tokens,
///     const uint32_t *bases, const uint32_t *positions, uint32_t first, uint32_t last)
///
/// Runs operations [first, last) of the plan on the pool for rows that each
/// carry a KV base and a position (several sequences in one batch, each in
/// its own range of the KV cache): row t stores at cache index bases[t] +
/// positions[t] and attends over [bases[t], bases[t] + positions[t]].
/// `range` when an index is outside the context, `invalid_arg` when two
/// rows share one.
export fn cf_plan_run_rows(handle: i32, tokens: ?*const anyopaque, n_tokens: usize, bases: ?*const anyopaque, positions: ?*const anyopaque, first: u32, last: u32) i32 {
    const t = table() orelse return Status.not_initialized.code();
    if (n_tokens == 0 or n_tokens > plan.max_batch) return Status.invalid_arg.code();
    const toks = words(tokens, n_tokens) catch |e| return statusOf(e);
    const bs = words(bases, n_tokens) catch |e| return statusOf(e);
    const ps = words(positions, n_tokens) catch |e| return statusOf(e);
    return plan.runRows(.{ .t = t, .run = &runPooled, .threads = pool.threads() }, handle, toks, bs, ps, first, last);
}

fn runInline(job: pool_mod.Job) void {
    if (job.items > 0) job.run(job.ctx, 0, job.items);
}

/// int32_t cf_plan_cancel(int32_t plan, uint32_t value)
///
/// Sets (1) or clears (0) the plan's cancel flag; callable while the plan
/// runs on another thread (a nonblocking FFI call), which then returns
/// `cancelled` (-15) before its next operation.
export fn cf_plan_cancel(handle: i32, value: u32) i32 {
    return plan.setCancel(handle, value);
}

/// int32_t cf_plan_destroy(int32_t plan)
export fn cf_plan_destroy(handle: i32) i32 {
    return plan.destroy(handle);
}

/// int32_t cf_pack(const uint32_t *run, size_t run_words, int32_t dst, size_t dst_offset,
///     size_t dst_len, uint32_t evict)
///
/// Packs a tiled Q4_0/Q8_0 run (one run descriptor, plan.zig) into 16-row
/// panels (packing.zig) at [dst_offset, dst_offset + dst_len) of an
/// allocation; evict = 1 drops the source pages as they are packed.
export fn cf_pack(run: ?*const anyopaque, run_words: usize, dst: i32, dst_offset: usize, dst_len: usize, evict: u32) i32 {
    if (evict > 1) return Status.invalid_arg.code();
    const t = table() orelse return Status.not_initialized.code();
    if (run_words != plan.run_words) return Status.invalid_arg.code();
    const r = words(run, run_words) catch |e| return statusOf(e);
    return plan.pack(.{ .t = t, .run = &runPooled }, r, dst, dst_offset, dst_len, evict == 1);
}

// ---------------------------------------------------------------------------
// Memory (root_memory.zig)
// ---------------------------------------------------------------------------

comptime {
    // Its exports are part of this ABI; the import makes them analyzed.
    _ = @import("root_memory.zig");
}

// ---------------------------------------------------------------------------
// Direct reads and staging (root_io.zig; io.zig; docs/KERNELS.md)
// ---------------------------------------------------------------------------

comptime {
    // Its exports are part of this ABI; the import makes them analyzed.
    _ = @import("root_io.zig");
}

test {
    _ = plan;
    _ = @import("plan_check.zig");
    _ = @import("plan_exec.zig");
    _ = @import("plan_rows.zig");
    _ = @import("plan_slices.zig");
    _ = @import("plan_matmul.zig");
    _ = @import("plan_pack.zig");
    _ = abi;
    _ = cpu;
    _ = memory;
    _ = pool_mod;
    _ = @import("handles.zig");
    _ = @import("act_q8_k.zig");
    if (!is_wasm) _ = io;
    if (!is_wasm) _ = prefetch;
    if (!is_wasm) _ = proc_status;
}

test "exports validate before dispatching" {
    const kx = @import("root_kernels.zig");
    try std.testing.expectEqual(@as(i32, 0), cf_init(1, 2, 0) - 1);
    defer cf_shutdown();
    // Panel prefetch: auto follows the CPU, on and off are kept across cf_init.
    try std.testing.expectEqual(Status.invalid_arg.code(), cf_set_panel_prefetch(3));
    try std.testing.expectEqual(@as(i32, 1), cf_set_panel_prefetch(1));
    try std.testing.expectEqual(@as(i32, 0), cf_set_panel_prefetch(2));
    try std.testing.expectEqual(@as(i32, 1), cf_init(1, 2, 0));
    try std.testing.expectEqual(@as(i32, 0), cf_set_panel_prefetch(2));
    try std.testing.expectEqual(@as(i32, @intFromBool(cpu.panelPrefetchPays())), cf_set_panel_prefetch(0));
    var x: [64]f32 = undefined;
    for (&x, 0..) |*v, i| v.* = @floatFromInt(i);
    var q: [68]u8 = undefined;
    try std.testing.expectEqual(Status.ok.code(), kx.cf_quantize_q8_0(&x, 64, &q, q.len));
    try std.testing.expectEqual(Status.length.code(), kx.cf_quantize_q8_0(&x, 64, &q, q.len - 1));
    try std.testing.expectEqual(Status.length.code(), kx.cf_quantize_q8_0(&x, 63, &q, q.len));
    try std.testing.expectEqual(Status.invalid_arg.code(), kx.cf_quantize_q8_0(null, 64, &q, q.len));
    const misaligned: *const anyopaque = @ptrFromInt(@intFromPtr(&x) + 1);
    try std.testing.expectEqual(Status.alignment.code(), kx.cf_quantize_q8_0(misaligned, 32, &q, q.len));
    var y: [3]f32 = undefined;
    try std.testing.expectEqual(Status.length.code(), kx.cf_matvec_q8_0(&q, q.len, 2, 64, &q, q.len, &y, 3));
    try std.testing.expectEqual(Status.overflow.code(), kx.cf_matvec_q8_0(&q, q.len, std.math.maxInt(usize), 64, &q, q.len, &y, 3));
    try std.testing.expectEqual(Status.ok.code(), kx.cf_matvec_q8_0(&q, q.len, 1, 64, &q, q.len, &y, 3));
    try std.testing.expectEqual(Status.range.code(), kx.cf_rope(&x, 64, 1, 64, 64, abi.rope_max_pos + 1, &x, 32, 1));
    try std.testing.expectEqual(Status.invalid_arg.code(), kx.cf_rope(&x, 64, 1, 64, 63, 0, &x, 32, 1));
    try std.testing.expectEqual(Status.invalid_arg.code(), cf_init(9, 1, 0));
    try std.testing.expectEqual(Status.unsupported.code(), cf_init(3, 1, std.math.maxInt(u64)));
}
