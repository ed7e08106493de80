// Package hotwire encodes and decodes, by hand with protowire instead of
// through protobuf's reflection, the bolide.v1 messages that carry one entry
// per message: SendRequest on the way in, SendResponse on the way out,
// and the PullResponse a consumer reads.
//
// The bytes are plain protobuf, the encoding proto/bolide/v1/broker.proto
// defines, so either end may use the generated code instead:
//
//	SendRequest  { 1: request_id varint, 2: producer_group bytes,
//	               3: messages (repeated Message), 4: packed bytes,
//	               5: packed_topic, 6: packed_queue_id varint }
//	Message      { 1: topic, 2: queue_id, 3: flag, 4: body,
//	               5: properties (map entry {1: key, 2: value}),
//	               6: born_timestamp, 7: born_host, 8: sys_flag,
//	               9: reconsume_times }
//	SendResponse { 1: request_id varint, 2: status {1: code, 2: message},
//	               3: results (repeated SendResult), 4: broker_name }
//	SendResult   { 1: msg_id, 2: unique_id, 3: queue_id, 4: queue_offset,
//	               5: commit_log_offset }
//	PullResponse { 1: status {1: code, 2: message}, 2: pull_status varint,
//	               3: records (repeated bytes, stored records),
//	               4: next_offset, 5: min_offset, 6: max_offset }
//
// DecodePullResponse does not copy the records: they are slices of its
// input, which the caller owns (the frame client reads each answer into a
// buffer of its own).
//
// As protobuf's own encoder does, fields at their zero value are left out
// and map entries come in no set order; the decoder skips unknown fields
// and refuses what proto.Unmarshal refuses (a string that is not UTF-8, a
// truncated field, an invalid field number). The tests hold both to the
// generated code: whatever these functions write, proto.Unmarshal reads
// back equal, and DecodeSendResponse and DecodePullResponse agree with
// proto.Unmarshal on every input.
//
// AppendPackedSendRequest writes a SendRequest with its messages packed
// (fields 4 to 6, each message an entry in message.AppendPacked's layout)
// in place of field 3, the form the SDK sends over frames. It writes the
// request id, group and topic first and the packed field last, its length
// written once the entries are (a varint of up to five bytes, with the
// entries moved back over the room it did not need).
//
// The request's decoder, used by the broker, is
// broker/frontend/v1wire.DecodeSendRequest.
package hotwire
