//! Stages of the direct reads (io.zig): one aligned allocation of
//! `n_slots` slots per stage, each slot holding one expert's bytes, the key
//! naming it (layer, expert), its read request, a pin count and its last
//! use; least-recently-used eviction among slots neither pinned nor in
//! flight. Files and stages share io.zig's lock: a stage pins its file.

const std = @import("std");
const abi = @import("abi.zig");
const common = @import("handles.zig");
const io = @import("io.zig");
const io_readers = @import("io_readers.zig");

const assert = std.debug.assert;
const c = std.c;
const Atomic = std.atomic.Value;
const Futex = std.Thread.Futex;
const Error = io.Error;
const Info = io.Info;
const StageInfo = io.StageInfo;
const Slot = io.Slot;
const State = io_readers.State;
const Request = io_readers.Request;
const block = io_readers.block;
const shutdown = io_readers.shutdown;
const lock = &io.lock;
const statusOf = io.statusOf;
const errorOf = io.errorOf;
const errno = io.errno;
const openFile = io.openFile;
const closeFile = io.closeFile;
const file_table = io.file_table;
const max_slot_bytes = io.max_slot_bytes;
const max_slots_per_stage = io.max_slots_per_stage;
const max_total_slots = io.max_total_slots;
const max_stage_bytes = io.max_stage_bytes;
const alignedSpan = io.alignedSpan;
const chunkBytes = io.chunkBytes;
const flag_direct = io.flag_direct;

const SlotMeta = struct {
    keyed: bool = false,
    layer: u32 = 0,
    expert: u32 = 0,
    file_offset: u64 = 0,
    length: usize = 0,
    data_offset: usize = 0,
    pins: u32 = 0,
    last_use: u64 = 0,
    request: Request = .{},

    fn state(m: *const SlotMeta) State {
        return m.request.loadState();
    }
};

const Stage = struct {
    kind: enum(u8) { free, live } = .free,
    generation: u32 = 0,
    file: i32 = 0,
    direct: bool = false,
    alignment: usize = 1,
    /// The allocation: `mapped_len` bytes from `map_base`; slots from `base`.
    map_base: usize = 0,
    mapped_len: usize = 0,
    base: usize = 0,
    slot_bytes: usize = 0,
    slots: []SlotMeta = &.{},
    clock: u64 = 0,
    /// Plans holding the stage.
    pins: u32 = 0,
    hits: u64 = 0,
    misses: u64 = 0,
    bytes_read: Atomic(u64) = .init(0),
    stall_ns: Atomic(u64) = .init(0),
    /// Requests of this stage not finished; destroy waits for zero.
    inflight: Atomic(u32) = .init(0),
};

var stages: [common.max_regions]Stage = [_]Stage{.{}} ** common.max_regions;
const stage_table = common.Table(Stage, &stages);
var total_slots: u32 = 0;

/// Creates a stage of `n_slots` slots of at least `slot_bytes` bytes for
/// reads of file `file`. Returns a handle (> 0) or a status code.
pub fn createStage(file: i32, slot_bytes: usize, n_slots: u32, out: *StageInfo) i32 {
    if (slot_bytes == 0 or slot_bytes > max_slot_bytes) return abi.Status.invalid_arg.code();
    if (n_slots == 0 or n_slots > max_slots_per_stage) return abi.Status.invalid_arg.code();
    lock.lock();
    defer lock.unlock();
    const f = file_table.lookup(file, .open) orelse return abi.Status.handle.code();
    const page = std.heap.pageSize();
    const stride_align = @max(f.alignment, page);
    const stride = std.mem.alignForward(usize, slot_bytes, stride_align);
    const size = std.math.mul(usize, stride, n_slots) catch return abi.Status.overflow.code();
    if (size > max_stage_bytes) return abi.Status.limit.code();
    if (total_slots + n_slots > max_total_slots) return abi.Status.limit.code();
    const index = stage_table.claim() orelse return abi.Status.limit.code();

    const meta = std.heap.page_allocator.alloc(SlotMeta, n_slots) catch return abi.Status.no_memory.code();
    var keep_meta = false;
    defer if (!keep_meta) std.heap.page_allocator.free(meta);
    for (meta) |*m| m.* = .{};

    const extra = if (f.alignment > page) f.alignment else 0;
    const total = size + extra;
    const p = c.mmap(null, total, c.PROT.READ | c.PROT.WRITE, .{ .TYPE = .PRIVATE, .ANONYMOUS = true }, -1, 0);
    if (p == c.MAP_FAILED) return if (errno() == 12) abi.Status.no_memory.code() else abi.ioStatus(errno());
    const map_base = @intFromPtr(p);
    const base = std.mem.alignForward(usize, map_base, f.alignment);
    assert(base + size <= map_base + total);
    assert(base % f.alignment == 0 and stride % f.alignment == 0);

    const s = &stages[index];
    const generation = stage_table.nextGeneration(s);
    s.* = .{
        .kind = .live,
        .generation = generation,
        .file = file,
        .direct = f.direct,
        .alignment = f.alignment,
        .map_base = map_base,
        .mapped_len = total,
        .base = base,
        .slot_bytes = stride,
        .slots = meta,
    };
    keep_meta = true;
    f.stages += 1;
    total_slots += n_slots;
    out.* = .{ .slot_bytes = stride, .n_slots = n_slots, .alignment = f.alignment, .flags = if (f.direct) flag_direct else 0 };
    return stage_table.handleOf(index, generation);
}

/// Destroys a stage: `busy` while a plan pins it or a slot is pinned;
/// otherwise waits for every read in flight, then frees the slots.
pub fn destroyStage(handle: i32) i32 {
    lock.lock();
    defer lock.unlock();
    const s = stage_table.lookup(handle, .live) orelse return abi.Status.handle.code();
    if (s.pins > 0) return abi.Status.busy.code();
    for (s.slots) |*m| if (m.pins > 0) return abi.Status.busy.code();
    drain(s);
    const f = file_table.lookup(s.file, .open) orelse unreachable; // closing refuses while stages live
    assert(f.stages > 0);
    f.stages -= 1;
    assert(total_slots >= s.slots.len);
    total_slots -= @intCast(s.slots.len);
    _ = c.munmap(@ptrFromInt(s.map_base), s.mapped_len);
    std.heap.page_allocator.free(s.slots);
    const generation = s.generation;
    s.* = .{ .generation = generation };
    return abi.Status.ok.code();
}

/// Waits (holding `lock`: no new read can start) until no read of `s` is in
/// flight. Readers never take `lock`.
fn drain(s: *Stage) void {
    while (true) {
        const n = s.inflight.load(.acquire);
        if (n == 0) break;
        Futex.wait(&s.inflight, n);
    }
    for (s.slots) |*m| assert(m.state() != .pending);
}

fn liveStage(handle: i32) Error!*Stage {
    return stage_table.lookup(handle, .live) orelse error.Handle;
}

fn slotData(s: *const Stage, index: usize) [*]u8 {
    assert(index < s.slots.len);
    return @ptrFromInt(s.base + index * s.slot_bytes);
}

/// Pins `(layer, expert)` in a slot of `stage`, reading
/// [file_offset, file_offset + length) of the stage's file into it unless it
/// is cached (read done or in flight). On a miss the least-recently-used
/// slot that is neither pinned nor being read is taken. `out.data` is where
/// the byte at file_offset is once `wait` returns. Every acquire is paired
/// with one `release`. Errors: Handle, InvalidArg (zero length, or a cached
/// key with another range), Range (past the file's end), Length (the
/// aligned range exceeds slot_bytes), Limit (every slot pinned or being
/// read), Busy/NoMemory (the readers cannot run).
pub fn acquire(stage: i32, layer: u32, expert: u32, file_offset: u64, length: usize, out: *Slot) Error!void {
    lock.lock();
    defer lock.unlock();
    const s = try liveStage(stage);
    const f = file_table.lookup(s.file, .open) orelse unreachable;
    const span = try alignedSpan(file_offset, length, s.alignment);
    if (file_offset + length > @as(u64, @intCast(f.size))) return error.Range;
    if (span.len > s.slot_bytes) return error.Length;
    s.clock += 1;

    var victim: ?usize = null;
    for (s.slots, 0..) |*m, i| {
        if (m.keyed and m.layer == layer and m.expert == expert) {
            if (m.file_offset != file_offset or m.length != length) return error.InvalidArg;
            if (m.state() == .failed and m.pins == 0) {
                victim = i; // a failed read nobody waits for: read again
                break;
            }
            m.pins += 1;
            m.last_use = s.clock;
            s.hits += 1;
            out.* = .{ .index = @intCast(i), .data = slotData(s, i) + m.data_offset, .length = length, .hit = true };
            return;
        }
    }
    if (victim == null) victim = lruVictim(s.slots);
    const i = victim orelse return error.Limit;
    const m = &s.slots[i];
    assert(m.pins == 0 and m.state() != .pending);
    m.keyed = true;
    m.layer = layer;
    m.expert = expert;
    m.file_offset = file_offset;
    m.length = length;
    m.data_offset = span.data_offset;
    m.last_use = s.clock;
    m.pins = 1;
    errdefer {
        m.keyed = false;
        m.pins = 0;
    }
    const r = &m.request;
    const chunk = chunkBytes(span.len, s.alignment);
    r.fd = f.fd;
    r.direct = s.direct;
    r.alignment = s.alignment;
    r.dst = slotData(s, i);
    r.start = span.start;
    r.len = span.len;
    r.need = span.need;
    r.chunk = chunk;
    r.n_chunks = @intCast(std.math.divCeil(usize, span.len, chunk) catch unreachable);
    r.file_size = f.size;
    r.mtime_sec = f.mtime_sec;
    r.mtime_nsec = f.mtime_nsec;
    r.bytes = &s.bytes_read;
    r.inflight = &s.inflight;
    r.status.store(0, .monotonic);
    r.remaining.store(r.n_chunks, .monotonic);
    r.state.store(@intFromEnum(State.pending), .release);
    _ = s.inflight.fetchAdd(1, .acq_rel);
    io_readers.submit(r) catch |e| {
        r.state.store(@intFromEnum(State.idle), .release);
        _ = s.inflight.fetchSub(1, .acq_rel);
        return e;
    };
    s.misses += 1;
    out.* = .{ .index = @intCast(i), .data = slotData(s, i) + span.data_offset, .length = length, .hit = false };
}

/// The slot to reuse: unpinned and not being read; an empty one first,
/// else the least recently used. Null when there is none.
fn lruVictim(slots: []const SlotMeta) ?usize {
    var best: ?usize = null;
    for (slots, 0..) |*m, i| {
        if (m.pins > 0 or m.state() == .pending) continue;
        if (!m.keyed) return i;
        if (best == null or m.last_use < slots[best.?].last_use) best = i;
    }
    return best;
}

/// Blocks until the read into a slot the caller pinned is complete; returns
/// 0 or the read's status code (an errno status for I/O errors). A failed
/// slot is unkeyed, so that the next acquire reads it again. The time spent
/// blocked is added to the stage's stall counter.
pub fn readStatus(stage: i32, slot: u32) i32 {
    const r = pinnedRequest(stage, slot) catch |e| return statusOf(e);
    // Pinned: the stage cannot be destroyed nor the slot reused meanwhile.
    const ns = block(r);
    const status = switch (r.loadState()) {
        .done => abi.Status.ok.code(),
        .failed => r.status.load(.acquire),
        .idle, .pending => unreachable,
    };
    lock.lock();
    defer lock.unlock();
    const s = stage_table.lookup(stage, .live) orelse unreachable;
    _ = s.stall_ns.fetchAdd(ns, .monotonic);
    if (status != 0) s.slots[slot].keyed = false;
    return status;
}

fn pinnedRequest(stage: i32, slot: u32) Error!*Request {
    lock.lock();
    defer lock.unlock();
    const s = try liveStage(stage);
    if (slot >= s.slots.len) return error.Range;
    const m = &s.slots[slot];
    // Not `keyed`: a failed read unkeys its slot, and a second holder of
    // the same pin still waits for (and gets) the failure.
    if (m.pins == 0 or m.state() == .idle) return error.InvalidArg;
    return &m.request;
}

/// `readStatus` as an error: Io for an I/O failure (its errno is the
/// `readStatus` of the same failure, before the slot is reused).
pub fn wait(stage: i32, slot: u32) Error!void {
    const status = readStatus(stage, slot);
    if (status != 0) return errorOf(status);
}

/// Undoes one `acquire` of a slot (the slot must be pinned).
pub fn release(stage: i32, slot: u32) void {
    const rc = releaseChecked(stage, slot);
    assert(rc == 0);
}

/// `release` for callers that may pass anything: a status code.
pub fn releaseChecked(stage: i32, slot: u32) i32 {
    lock.lock();
    defer lock.unlock();
    const s = liveStage(stage) catch |e| return statusOf(e);
    if (slot >= s.slots.len) return abi.Status.range.code();
    const m = &s.slots[slot];
    if (m.pins == 0) return abi.Status.invalid_arg.code();
    m.pins -= 1;
    return abi.Status.ok.code();
}

/// Copies [offset, offset + dst.len) of the expert held by a pinned slot
/// whose read is done (offsets relative to the acquired file_offset).
pub fn copyOut(stage: i32, slot: u32, offset: usize, dst: []u8) i32 {
    lock.lock();
    defer lock.unlock();
    const s = liveStage(stage) catch |e| return statusOf(e);
    if (slot >= s.slots.len) return abi.Status.range.code();
    const m = &s.slots[slot];
    if (m.pins == 0) return abi.Status.invalid_arg.code();
    switch (m.state()) {
        .done => {},
        .failed => return m.request.status.load(.acquire),
        .pending => return abi.Status.busy.code(),
        .idle => return abi.Status.invalid_arg.code(),
    }
    const end = std.math.add(usize, offset, dst.len) catch return abi.Status.overflow.code();
    if (end > m.length) return abi.Status.range.code();
    assert(m.data_offset + m.length <= s.slot_bytes);
    if (dst.len == 0) return abi.Status.ok.code();
    const src = slotData(s, slot) + m.data_offset;
    @memcpy(dst, src[offset..end]);
    return abi.Status.ok.code();
}

/// hits, misses, bytes read, nanoseconds blocked in `wait`.
pub fn stats(stage: i32, out: *[4]u64) i32 {
    lock.lock();
    defer lock.unlock();
    const s = liveStage(stage) catch |e| return statusOf(e);
    out.* = .{ s.hits, s.misses, s.bytes_read.load(.monotonic), s.stall_ns.load(.monotonic) };
    return abi.Status.ok.code();
}

pub fn resetStats(stage: i32) i32 {
    lock.lock();
    defer lock.unlock();
    const s = liveStage(stage) catch |e| return statusOf(e);
    s.hits = 0;
    s.misses = 0;
    s.bytes_read.store(0, .monotonic);
    s.stall_ns.store(0, .monotonic);
    return abi.Status.ok.code();
}

/// Pins a stage for a plan (it cannot be destroyed until `unpin`); `out`
/// gets its geometry.
pub fn pin(stage: i32, out: *StageInfo) Error!void {
    lock.lock();
    defer lock.unlock();
    const s = try liveStage(stage);
    s.pins += 1;
    out.* = .{ .slot_bytes = s.slot_bytes, .n_slots = s.slots.len, .alignment = s.alignment, .flags = if (s.direct) flag_direct else 0 };
}

/// Undoes one `pin`.
pub fn unpin(stage: i32) void {
    lock.lock();
    defer lock.unlock();
    const s = stage_table.lookup(stage, .live) orelse unreachable;
    assert(s.pins > 0);
    s.pins -= 1;
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

const testing = std.testing;
test "least recently used victim: empty first, never pinned or in flight" {
    var slots = [_]SlotMeta{ .{}, .{}, .{}, .{} };
    for (&slots, 0..) |*m, i| {
        m.keyed = true;
        m.last_use = 10 - i;
        m.request.state.store(@intFromEnum(State.done), .monotonic);
    }
    try testing.expectEqual(@as(?usize, 3), lruVictim(&slots));
    slots[3].pins = 1;
    try testing.expectEqual(@as(?usize, 2), lruVictim(&slots));
    slots[2].request.state.store(@intFromEnum(State.pending), .monotonic);
    try testing.expectEqual(@as(?usize, 1), lruVictim(&slots));
    slots[0].keyed = false;
    try testing.expectEqual(@as(?usize, 0), lruVictim(&slots));
    slots[0].pins = 2;
    slots[1].pins = 1;
    try testing.expectEqual(@as(?usize, null), lruVictim(&slots));
    slots[2].request.state.store(@intFromEnum(State.failed), .monotonic);
    try testing.expectEqual(@as(?usize, 2), lruVictim(&slots));
}

fn tmpPath(tmp: *testing.TmpDir, name: []const u8, buf: *[std.fs.max_path_bytes]u8) ![]const u8 {
    return tmp.dir.realpath(name, buf);
}

test "stage: reads, hits, misses, eviction, pins and limits on a real file" {
    var tmp = testing.tmpDir(.{});
    defer tmp.cleanup();
    var data: [300_000]u8 = undefined;
    var prng = std.Random.DefaultPrng.init(7);
    prng.random().bytes(&data);
    try tmp.dir.writeFile(.{ .sub_path = "e.bin", .data = &data });
    var path_buf: [std.fs.max_path_bytes]u8 = undefined;
    const path = try tmpPath(&tmp, "e.bin", &path_buf);

    var info: Info = undefined;
    const fh = openFile(path, &info);
    try testing.expect(fh > 0);
    defer _ = closeFile(fh);
    try testing.expectEqual(@as(u64, data.len), info.size);
    try testing.expect(std.math.isPowerOfTwo(info.alignment));
    if (info.flags & flag_direct == 0) try testing.expectEqual(@as(u64, 1), info.alignment);

    var si: StageInfo = undefined;
    const sh = createStage(fh, 70_000, 3, &si);
    try testing.expect(sh > 0);
    try testing.expectEqual(abi.Status.busy.code(), closeFile(fh));
    try testing.expect(si.slot_bytes >= 70_000 and si.slot_bytes % info.alignment == 0);

    var slot: Slot = undefined;
    const ranges = [_][2]usize{ .{ 1, 60_000 }, .{ 100_001, 33 }, .{ 299_000, 1000 } };
    for (ranges, 0..) |rg, k| {
        try acquire(sh, 0, @intCast(k), rg[0], rg[1], &slot);
        try testing.expect(!slot.hit);
        try wait(sh, slot.index);
        try testing.expectEqualSlices(u8, data[rg[0]..][0..rg[1]], slot.data[0..rg[1]]);
        var part: [16]u8 = undefined;
        try testing.expectEqual(@as(i32, 0), copyOut(sh, slot.index, rg[1] - 16, &part));
        try testing.expectEqualSlices(u8, data[rg[0] + rg[1] - 16 ..][0..16], &part);
        try testing.expectEqual(abi.Status.range.code(), copyOut(sh, slot.index, rg[1] - 15, &part));
    }
    // Every slot pinned: a fourth key is refused, not waited for.
    try testing.expectError(error.Limit, acquire(sh, 0, 9, 0, 10, &slot));
    try testing.expectEqual(abi.Status.busy.code(), destroyStage(sh));
    // A hit pins again; two releases for two acquires.
    try acquire(sh, 0, 1, 100_001, 33, &slot);
    try testing.expect(slot.hit);
    try testing.expectError(error.InvalidArg, acquire(sh, 0, 1, 100_000, 33, &slot));
    for (0..3) |i| release(sh, @intCast(i));
    release(sh, 1);
    try testing.expectEqual(abi.Status.invalid_arg.code(), releaseChecked(sh, 1));
    // LRU: key 0 was used least recently (key 1 was hit last, key 2 read after 0).
    try acquire(sh, 0, 9, 0, 10, &slot);
    try testing.expectEqual(@as(u32, 0), slot.index);
    try wait(sh, slot.index);
    release(sh, slot.index);
    try acquire(sh, 0, 0, 1, 60_000, &slot); // evicted: read again, into the next LRU (key 2's)
    try testing.expect(!slot.hit);
    try testing.expectEqual(@as(u32, 2), slot.index);
    try wait(sh, slot.index);
    try testing.expectEqualSlices(u8, data[1..60_001], slot.data[0..60_000]);
    release(sh, slot.index);
    // Errors that never start a read.
    try testing.expectError(error.Range, acquire(sh, 0, 5, data.len - 5, 6, &slot));
    try testing.expectError(error.Length, acquire(sh, 0, 5, 0, si.slot_bytes + 1, &slot));
    try testing.expectError(error.InvalidArg, acquire(sh, 0, 5, 0, 0, &slot));
    try testing.expectError(error.InvalidArg, wait(sh, 0)); // not pinned
    try testing.expectError(error.Range, wait(sh, 3));
    var st: [4]u64 = undefined;
    try testing.expectEqual(@as(i32, 0), stats(sh, &st));
    try testing.expectEqual(@as(u64, 1), st[0]);
    try testing.expectEqual(@as(u64, 5), st[1]);
    try testing.expect(st[2] >= 60_000 + 33 + 1000 + 10 + 60_000);
    try testing.expectEqual(@as(i32, 0), resetStats(sh));
    try testing.expectEqual(@as(i32, 0), stats(sh, &st));
    try testing.expectEqual([4]u64{ 0, 0, 0, 0 }, st);
    // Plans pin the stage itself.
    var pi: StageInfo = undefined;
    try pin(sh, &pi);
    try testing.expectEqual(abi.Status.busy.code(), destroyStage(sh));
    unpin(sh);
    try testing.expectEqual(@as(i32, 0), destroyStage(sh));
    try testing.expectEqual(abi.Status.handle.code(), destroyStage(sh));
    try testing.expectError(error.Handle, acquire(sh, 0, 0, 0, 1, &slot));
}

test "a file truncated after open fails the read, and the slot is reused" {
    var tmp = testing.tmpDir(.{});
    defer tmp.cleanup();
    const data = [_]u8{0x5a} ** 65536;
    try tmp.dir.writeFile(.{ .sub_path = "t.bin", .data = &data });
    var path_buf: [std.fs.max_path_bytes]u8 = undefined;
    const path = try tmpPath(&tmp, "t.bin", &path_buf);
    var info: Info = undefined;
    const fh = openFile(path, &info);
    try testing.expect(fh > 0);
    defer _ = closeFile(fh);
    var si: StageInfo = undefined;
    const sh = createStage(fh, 65536, 1, &si);
    try testing.expect(sh > 0);
    defer _ = destroyStage(sh);
    const f = try tmp.dir.openFile("t.bin", .{ .mode = .read_write });
    try f.setEndPos(1000);
    f.close();
    var slot: Slot = undefined;
    try acquire(sh, 1, 2, 4096, 8192, &slot);
    var twice: Slot = undefined;
    try acquire(sh, 1, 2, 4096, 8192, &twice); // a second holder of the same read
    try testing.expect(twice.hit and twice.index == slot.index);
    try testing.expectEqual(abi.Status.changed.code(), readStatus(sh, slot.index));
    try testing.expectEqual(abi.Status.changed.code(), readStatus(sh, twice.index));
    var byte: [1]u8 = undefined;
    try testing.expectEqual(abi.Status.changed.code(), copyOut(sh, slot.index, 0, &byte));
    release(sh, twice.index);
    release(sh, slot.index);
    // Unkeyed after the failure: the same key is a miss again, same slot.
    try acquire(sh, 1, 2, 4096, 8192, &slot);
    try testing.expect(!slot.hit);
    try testing.expectError(error.Changed, wait(sh, slot.index));
    release(sh, slot.index);
}

test "many reads in flight at once, then shutdown and restart" {
    var tmp = testing.tmpDir(.{});
    defer tmp.cleanup();
    var data: [1 << 20]u8 = undefined;
    var prng = std.Random.DefaultPrng.init(11);
    prng.random().bytes(&data);
    try tmp.dir.writeFile(.{ .sub_path = "m.bin", .data = &data });
    var path_buf: [std.fs.max_path_bytes]u8 = undefined;
    const path = try tmpPath(&tmp, "m.bin", &path_buf);
    var info: Info = undefined;
    const fh = openFile(path, &info);
    try testing.expect(fh > 0);
    defer _ = closeFile(fh);
    var si: StageInfo = undefined;
    const sh = createStage(fh, 600_000, 32, &si);
    try testing.expect(sh > 0);
    for (0..2) |round| {
        var slots: [32]Slot = undefined;
        for (&slots, 0..) |*sl, k| {
            const off = (k * 31_337 + round * 7) % (data.len - 600_000);
            try acquire(sh, @intCast(round), @intCast(k), off, 500_000 + k, sl);
        }
        for (&slots, 0..) |*sl, k| {
            const off = (k * 31_337 + round * 7) % (data.len - 600_000);
            try wait(sh, sl.index);
            try testing.expectEqualSlices(u8, data[off..][0 .. 500_000 + k], sl.data[0 .. 500_000 + k]);
            release(sh, sl.index);
        }
        shutdown(); // readers stop; the next read starts them again
    }
    // Destroying with reads in flight waits for them.
    var sl: Slot = undefined;
    for (0..8) |k| {
        try acquire(sh, 9, @intCast(k), k * 1000, 400_000, &sl);
        release(sh, sl.index);
    }
    try testing.expectEqual(@as(i32, 0), destroyStage(sh));
}
