// Package message is the leaf of Bolide: the Message type, RocketMQ's stored
// record layout (encode and decode, pure functions over []byte), property
// keys, sysflag bits, message ids and system topic names. It imports only the
// standard library.
//
// # Stored record layout
//
// Every message in the CommitLog is one record. All integers are big-endian.
// Offsets are for IPv4 hosts (8-byte host fields); an IPv6 host takes 20 bytes
// and moves every later field by 12.
//
//	offset size field
//	     0    4 TOTALSIZE            whole record length, this field included
//	     4    4 MAGICCODE            0xDAA320A7 (V1) or 0xDAA320AB (V2)
//	     8    4 BODYCRC              crc32(body) & 0x7FFFFFFF
//	    12    4 QUEUEID
//	    16    4 FLAG                 user flag
//	    20    8 QUEUEOFFSET          logical offset in the ConsumeQueue
//	    28    8 PHYSICALOFFSET       CommitLog offset of this record
//	    36    4 SYSFLAG              see SysFlag* constants
//	    40    8 BORNTIMESTAMP        ms since epoch, set by the producer
//	    48  8|20 BORNHOST            IPv4 4 B + port int32, or IPv6 16 B + port
//	     …    8 STORETIMESTAMP       ms since epoch, set inside the append lock
//	     …  8|20 STOREHOSTADDRESS    same encoding as BORNHOST
//	     …    4 RECONSUMETIMES
//	     …    8 PREPAREDTRANSACTIONOFFSET
//	     …  4+n BODY                 int32 length, then the bytes
//	     …  1+n TOPIC (V1)           int8 length (topics ≤ 127 bytes) …
//	        2+n TOPIC (V2)           … or int16 length for longer topics
//	     …  2+n PROPERTIES           int16 length, then k\x01v\x02k\x01v\x02…
//
// The fixed part is 91 bytes for IPv4 hosts and a V1 topic.
//
// Bolide always ends the properties with RocketMQ's optional record checksum
// (enabledAppendPropCRC): the 20 bytes "__CRC32#" \x01 d0 … d9 \x02, where the
// ten digits are crc32(record[0:TOTALSIZE-20]) & 0x7FFFFFFF written least
// significant digit first, exactly as RocketMQ's MessageDecoder.createCrc32
// writes them. Recovery verifies it, so a torn or flipped byte anywhere in a
// record — not only in its body — is detected.
//
// A record parked in a system topic (Reroute) is sent back to its real topic
// by RestoreRecord, which copies it and patches what changes (topic, queue,
// the properties dropped or set, the store host; offsets and store time
// left for the CommitLog to stamp) instead of decoding and encoding it: the
// result is the record Encode writes for Restore's message, byte for byte.
//
// # Packed batches
//
// A producer may send its messages packed (bolide.v1's SendRequest.packed):
// entries that carry what only the producer knows, which the broker turns
// into records by copying their parts between the fields it fills in
// itself (RocketMQ's clients send batches in a similar layout). The topic
// and queue are given once for the batch. One entry, big-endian:
//
//	offset size field
//	     0    4 ENTRYSIZE            whole entry length, this field included
//	     4    4 FLAG                 user flag
//	     8    4 SYSFLAG              as in the record; BORNHOST_V6 sizes BORNHOST
//	    12    8 BORNTIMESTAMP        ms since epoch; 0: the broker's clock
//	    20  8|20 BORNHOST            as in the record; all zeros: none given
//	     …    4 RECONSUMETIMES
//	     …  4+n BODY                 int32 length, then the bytes
//	     …  2+n PROPERTIES           int16 length, then k\x01v\x02 pairs
//
// The properties are stricter than a record's: every pair ends with
// \x02, names are not empty and come in strictly increasing byte order
// (so no name twice, and the record the broker writes is the one Encode
// writes for the same message), no name or value holds a separator, and
// the checksum name is the broker's. The entries follow each other with
// nothing between them. EncodePacked writes the record of an entry: the
// store host's, with the store host as born host when the entry names
// none, and the checksum trailer appended to the properties.
//
// # End of a CommitLog file
//
// When a record does not fit in what is left of a CommitLog segment, the
// writer fills the remainder with a blank: TOTALSIZE = bytes remaining and
// MAGICCODE = 0xCBD43194 (BlankMagic). Readers skip to the next segment.
// A zero TOTALSIZE marks the end of written data in a preallocated segment.
//
// # Message ids
//
// An offset message id is the store host (IPv4 4 B + port 4 B, or IPv6 16 B +
// port 4 B) followed by the 8-byte CommitLog offset, as upper-case hex (32 or
// 56 characters). A unique id (property UNIQ_KEY) is assigned by the producer:
// 16 bytes of client address, process id, a per-process random prefix, a
// timestamp and a counter, as 32 upper-case hex characters.
package message
