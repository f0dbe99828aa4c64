-- Wireshark dissector for peregrine's reliable-transport header over UDP
-- (port 5140 by default; change it in Preferences > Protocols > PEREGRINE).
-- The layout is core/wire/doc.go's: a 48-byte base header, a type body
-- (Ack 8, ExtendedAck 40, Nack 12, Resync 4 bytes), an extension chain
-- (placement / delivery index, global QPNs, source CID, region, seal,
-- seal key) and the
-- payload. A Send (type 14) carries its delivery-index descriptor in byte
-- 47 (core/dix.Desc) and, unless the descriptor puts it in the Placement
-- extension or omits it, the index in the SSN field under the tag byte.
--
-- Use:  wireshark -X lua_script:tools/wireshark/peregrine.lua capture.pcap
--       tshark -X lua_script:tools/wireshark/peregrine.lua -r capture.pcap -Y peregrine
-- or copy it to ~/.local/lib/wireshark/plugins/.

local p = Proto("peregrine", "Peregrine reliable transport")

local types = {
  [1] = "ConnOpen", [2] = "ConnAccept", [3] = "ConnClose", [4] = "PullRequest",
  [5] = "PullData", [6] = "PushRequest", [7] = "PushGrant", [8] = "PushSolicitedData",
  [9] = "PushUnsolicitedData", [10] = "Resync", [11] = "Ack", [12] = "ExtendedAck",
  [13] = "Nack", [14] = "Send",
}
local phases = { [0] = "none", [1] = "head", [2] = "middle", [3] = "tail" }
local windows = { [0] = "none", [1] = "request", [2] = "data" }
local nack_codes = {
  [1] = "ResourceExhausted", [2] = "ReceiverNotReady", [3] = "BadCID", [4] = "OutOfWindow",
  [5] = "ULPError", [6] = "ULPFatal", [7] = "Unexpected",
}
local placement_modes = { [1] = "absolute", [2] = "relative", [3] = "free-running" }
local ext_types = { [1] = "Placement", [2] = "Global QPNs", [3] = "Source CID", [4] = "Region", [5] = "Seal", [6] = "Seal key" }
local dix_kinds = { [0] = "none", [1] = "absolute", [2] = "relative", [3] = "free-running" }
local dix_widths = { [0] = "8 bits", [1] = "16 bits", [2] = "24 bits", [3] = "32 bits" }

local f = p.fields
f.version  = ProtoField.uint8("peregrine.version", "Version", base.DEC, nil, 0xf0)
f.cid      = ProtoField.uint24("peregrine.cid", "Destination CID", base.HEX)
f.type     = ProtoField.uint8("peregrine.type", "Type", base.DEC, types)
f.flags    = ProtoField.uint8("peregrine.flags", "Flags", base.HEX)
f.f_ackreq = ProtoField.bool("peregrine.flags.ack_requested", "AckRequested", 8, nil, 0x01)
f.f_retx   = ProtoField.bool("peregrine.flags.retransmission", "Retransmission", 8, nil, 0x02)
f.f_order  = ProtoField.bool("peregrine.flags.ordered", "Ordered", 8, nil, 0x04)
f.f_ioi    = ProtoField.bool("peregrine.flags.ioi_in_order", "IOIInOrder", 8, nil, 0x08)
f.f_last   = ProtoField.bool("peregrine.flags.last", "LastOfMessage", 8, nil, 0x10)
f.f_ecn    = ProtoField.bool("peregrine.flags.ecn_echo", "ECNEcho", 8, nil, 0x20)
f.f_ext    = ProtoField.bool("peregrine.flags.extension", "HasExtension", 8, nil, 0x40)
f.retry    = ProtoField.uint8("peregrine.retry", "Retry", base.DEC, nil, 0xf0)
f.phase    = ProtoField.uint8("peregrine.phase", "IOI phase", base.DEC, phases, 0x0c)
f.extwords = ProtoField.uint8("peregrine.extwords", "Extension words", base.DEC)
f.psn      = ProtoField.uint32("peregrine.psn", "PSN", base.DEC)
f.rsn      = ProtoField.uint32("peregrine.rsn", "RSN", base.DEC)
f.ssn      = ProtoField.uint32("peregrine.ssn", "SSN", base.DEC)
f.reqebsn  = ProtoField.uint32("peregrine.req_ebsn", "Request-window expected BSN", base.DEC)
f.dataebsn = ProtoField.uint32("peregrine.data_ebsn", "Data-window expected BSN", base.DEC)
f.txtime   = ProtoField.uint32("peregrine.tx_time", "Transmit time (ns mod 2^32)", base.DEC)
f.txecho   = ProtoField.uint32("peregrine.tx_echo", "Timestamp echo", base.DEC)
f.reqlen   = ProtoField.uint32("peregrine.reqlen", "Request length", base.DEC)
f.offset   = ProtoField.uint32("peregrine.offset", "Segment offset", base.DEC)
f.paylen   = ProtoField.uint16("peregrine.paylen", "Payload length", base.DEC)
f.hopecho  = ProtoField.uint8("peregrine.hop_echo", "Hop echo", base.DEC)
-- Send: the delivery-index descriptor (byte 47) and the index
f.desc     = ProtoField.uint8("peregrine.send.desc", "Delivery-index descriptor", base.HEX)
f.d_kind   = ProtoField.uint8("peregrine.send.desc.kind", "Index kind", base.DEC, dix_kinds, 0x03)
f.d_width  = ProtoField.uint8("peregrine.send.desc.width", "Index width", base.DEC, dix_widths, 0x0c)
f.d_ext    = ProtoField.bool("peregrine.send.desc.in_extension", "Index in the Placement extension", 8, nil, 0x10)
f.d_omit   = ProtoField.bool("peregrine.send.desc.omitted", "Index omitted", 8, nil, 0x20)
f.d_tag    = ProtoField.uint8("peregrine.send.tag", "Index tag (relative base, or log2 ring depth)", base.DEC)
f.d_index  = ProtoField.uint32("peregrine.send.index", "Delivery index", base.DEC)
-- early ConnOpen (ReqLen 0x44430002): RSN and SSN name the connect (anti-replay)
f.earlyinc = ProtoField.uint32("peregrine.early.incarnation", "Initiator incarnation", base.HEX)
f.earlynum = ProtoField.uint32("peregrine.early.connect", "Connect number", base.DEC)
-- ACK and extended-ACK body
f.oow      = ProtoField.uint8("peregrine.ack.oow", "Out-of-window flags", base.HEX)
f.rxbuf    = ProtoField.uint8("peregrine.ack.rxbuf", "Receive buffer level", base.DEC)
f.oowcount = ProtoField.uint16("peregrine.ack.oow_count", "Out-of-window drops", base.DEC)
f.rxtime   = ProtoField.uint32("peregrine.ack.rx_time", "Receive time of the echoed packet", base.DEC)
f.reqmap   = ProtoField.bytes("peregrine.ack.req_bitmap", "Request-window receive bitmap")
f.datamap  = ProtoField.bytes("peregrine.ack.data_bitmap", "Data-window receive bitmap")
-- NACK body
f.nackcode = ProtoField.uint8("peregrine.nack.code", "NACK code", base.DEC, nack_codes)
f.nackwin  = ProtoField.uint8("peregrine.nack.window", "NACK window", base.DEC, windows)
f.ulpcode  = ProtoField.uint8("peregrine.nack.ulp_code", "ULP code", base.DEC)
f.nackpsn  = ProtoField.uint32("peregrine.nack.psn", "NACKed PSN", base.DEC)
f.rnr      = ProtoField.uint32("peregrine.nack.rnr_us", "RNR timeout (us)", base.DEC)
-- Resync body
f.rscode   = ProtoField.uint8("peregrine.resync.code", "Resync code", base.DEC)
f.rsorig   = ProtoField.uint8("peregrine.resync.orig_type", "Original type", base.DEC, types)
-- Extensions
f.ext      = ProtoField.none("peregrine.ext", "Extension")
f.exttype  = ProtoField.uint8("peregrine.ext.type", "Extension type", base.DEC, ext_types)
f.extlen   = ProtoField.uint8("peregrine.ext.len", "Extension length (words)", base.DEC)
f.pmode    = ProtoField.uint8("peregrine.ext.placement.mode", "Placement mode", base.DEC, placement_modes)
f.dindex   = ProtoField.uint32("peregrine.ext.placement.index", "Delivery index", base.DEC)
f.dstqpn   = ProtoField.uint24("peregrine.ext.qpn.dst", "Destination global QPN", base.DEC)
f.srcqpn   = ProtoField.uint24("peregrine.ext.qpn.src", "Source global QPN", base.DEC)
f.srccid   = ProtoField.uint24("peregrine.ext.source_cid", "Source CID", base.HEX)
f.rkey     = ProtoField.uint32("peregrine.ext.region.key", "Region key", base.HEX)
f.raddr    = ProtoField.uint64("peregrine.ext.region.addr", "Region address", base.HEX)
f.seal     = ProtoField.bytes("peregrine.ext.seal", "Integrity tag (48 bits)")
f.payload  = ProtoField.bytes("peregrine.payload", "Payload")

local body_len = { [10] = 4, [11] = 8, [12] = 40, [13] = 12 }
local BASE = 48

local function dissect_ext(buf, tree, off, stop)
  while off + 2 <= stop do
    local t = buf(off, 1):uint()
    local words = buf(off + 1, 1):uint()
    if words == 0 or off + words * 4 > stop then
      tree:add_expert_info(PI_MALFORMED, PI_ERROR, "extension length runs past the chain")
      return
    end
    local sub = tree:add(f.ext, buf(off, words * 4)):set_text("Extension: " .. (ext_types[t] or ("type " .. t)))
    sub:add(f.exttype, buf(off, 1))
    sub:add(f.extlen, buf(off + 1, 1))
    if t == 1 and words >= 2 then
      sub:add(f.pmode, buf(off + 2, 1))
      sub:add(f.dindex, buf(off + 4, 4))
    elseif t == 2 and words >= 2 then
      sub:add(f.dstqpn, buf(off + 2, 3))
      sub:add(f.srcqpn, buf(off + 5, 3))
    elseif t == 3 and words >= 2 then
      sub:add(f.srccid, buf(off + 5, 3))
    elseif t == 4 and words >= 4 then
      sub:add(f.rkey, buf(off + 4, 4))
      sub:add(f.raddr, buf(off + 8, 8))
    elseif t == 5 and words >= 2 then
      sub:add(f.seal, buf(off + 2, 6))
    end
    off = off + words * 4
  end
end

function p.dissector(buf, pinfo, root)
  if buf:len() < BASE then return 0 end
  local ver = bit.rshift(buf(0, 1):uint(), 4)
  if ver ~= 1 then return 0 end
  local t = buf(4, 1):uint()
  local blen = body_len[t] or 0
  local extwords = buf(7, 1):uint()
  local hlen = BASE + blen + extwords * 4
  pinfo.cols.protocol = "PEREGRINE"
  local tree = root:add(p, buf(0, math.min(hlen, buf:len())))
  tree:add(f.version, buf(0, 1))
  tree:add(f.cid, buf(1, 3))
  tree:add(f.type, buf(4, 1))
  local fl = tree:add(f.flags, buf(5, 1))
  for _, x in ipairs({ f.f_ackreq, f.f_retx, f.f_order, f.f_ioi, f.f_last, f.f_ecn, f.f_ext }) do
    fl:add(x, buf(5, 1))
  end
  tree:add(f.retry, buf(6, 1))
  tree:add(f.phase, buf(6, 1))
  tree:add(f.extwords, buf(7, 1))
  tree:add(f.psn, buf(8, 4))
  tree:add(f.rsn, buf(12, 4))
  tree:add(f.ssn, buf(16, 4))
  tree:add(f.reqebsn, buf(20, 4))
  tree:add(f.dataebsn, buf(24, 4))
  tree:add(f.txtime, buf(28, 4))
  tree:add(f.txecho, buf(32, 4))
  tree:add(f.reqlen, buf(36, 4))
  tree:add(f.offset, buf(40, 4))
  tree:add(f.paylen, buf(44, 2))
  tree:add(f.hopecho, buf(46, 1))
  if t == 14 then
    local d = buf(47, 1):uint()
    local dt = tree:add(f.desc, buf(47, 1))
    dt:add(f.d_kind, buf(47, 1))
    dt:add(f.d_width, buf(47, 1))
    dt:add(f.d_ext, buf(47, 1))
    dt:add(f.d_omit, buf(47, 1))
    local kind = bit.band(d, 3)
    local width = (bit.band(bit.rshift(d, 2), 3) + 1) * 8
    if kind ~= 0 and bit.band(d, 0x30) == 0 then
      if width == 32 then
        tree:add(f.d_index, buf(16, 4))
      else
        tree:add(f.d_tag, buf(16, 1))
        tree:add(f.d_index, buf(16, 4), bit.band(buf(16, 4):uint(), bit.lshift(1, width) - 1))
      end
    elseif kind ~= 0 and bit.band(d, 0x10) ~= 0 and width < 32 then
      tree:add(f.d_tag, buf(16, 1))
    end
  end
  if t == 1 and buf(36, 4):uint() == 0x44430002 then
    tree:add(f.earlyinc, buf(12, 4))
    tree:add(f.earlynum, buf(16, 4))
  end
  if buf:len() < hlen then
    tree:add_expert_info(PI_MALFORMED, PI_ERROR, "header shorter than its body and extensions")
    return buf:len()
  end
  local b = BASE
  if t == 11 or t == 12 then
    tree:add(f.oow, buf(b, 1))
    tree:add(f.rxbuf, buf(b + 1, 1))
    tree:add(f.oowcount, buf(b + 2, 2))
    tree:add(f.rxtime, buf(b + 4, 4))
    if t == 12 then
      tree:add(f.reqmap, buf(b + 8, 16))
      tree:add(f.datamap, buf(b + 24, 16))
    end
  elseif t == 13 then
    tree:add(f.nackcode, buf(b, 1))
    tree:add(f.nackwin, buf(b + 1, 1))
    tree:add(f.ulpcode, buf(b + 2, 1))
    tree:add(f.nackpsn, buf(b + 4, 4))
    tree:add(f.rnr, buf(b + 8, 4))
  elseif t == 10 then
    tree:add(f.rscode, buf(b, 1))
    tree:add(f.rsorig, buf(b + 1, 1))
  end
  if extwords > 0 then
    dissect_ext(buf, tree, BASE + blen, hlen)
  end
  local plen = buf(44, 2):uint()
  if plen > 0 and hlen + plen <= buf:len() then
    tree:add(f.payload, buf(hlen, plen))
  end
  local name = types[t] or ("Type " .. t)
  pinfo.cols.info = string.format("%s cid=0x%06x psn=%d rsn=%d len=%d", name, buf(1, 3):uint(), buf(8, 4):uint(), buf(12, 4):uint(), plen)
  return buf:len()
end

p.prefs.udp_port = Pref.uint("UDP port", 5140, "UDP destination port of the transport")
local registered = 5140
DissectorTable.get("udp.port"):add(registered, p)
function p.prefs_changed()
  if p.prefs.udp_port ~= registered then
    DissectorTable.get("udp.port"):remove(registered, p)
    registered = p.prefs.udp_port
    DissectorTable.get("udp.port"):add(registered, p)
  end
end
