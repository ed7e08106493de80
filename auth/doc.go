// Package auth is Bolide's access control: who a caller is
// (authentication) and what it may do (authorization), for every protocol
// the daemons speak. It knows no protocol: front ends hand it the values
// their requests carry and get back a Principal or a coded error
// (errcode.Unauthenticated for a caller who cannot be identified,
// errcode.NoPermission for one who may not do what it asks).
//
// # Users: the ACL file
//
// Users come from one YAML file per daemon (--acl-file), RocketMQ's
// plain_acl.yml read as it is:
//
//	accounts:
//	  - accessKey: RocketMQ          # at least 6 characters
//	    secretKey: 12345678          # at least 6 characters; the HMAC key
//	    whiteRemoteAddress: 10.0.0.* # optional: narrows where the key may be used from
//	    admin: false                 # an admin may do everything
//	    defaultTopicPerm: DENY       # a topic no rule names
//	    defaultGroupPerm: SUB        # a group no rule names
//	    topicPerms: [topicA=DENY, topicB=PUB|SUB, orders-*=PUB]
//	    groupPerms: [groupA=DENY, groupB=PUB|SUB]
//
// Permissions are DENY, PUB, SUB and PUB|SUB (RocketMQ's bits 1, 4, 8);
// a name ending in * is a prefix. The most specific rule wins: an exact
// name, then the longest prefix, then the default (DENY when unset); the
// same name listed twice with DENY is denied. A group rule may be written
// with its %RETRY% prefix, as RocketMQ stores them. Two RocketMQ rules are
// deliberately not kept: globalWhiteRemoteAddresses and a matching
// whiteRemoteAddress let requests skip the signature in RocketMQ; here an
// address never replaces authentication (the global list is ignored with
// a warning, the per-account one only narrows), and "*" is refused.
//
// The file is looked at again at most once a second and reloaded when it
// changed; a file that no longer loads is logged and the previous users
// stay. The Acl service (bolide acl) rewrites it atomically.
//
// # Signatures
//
// RocketMQ remoting (ACL 1.0, as its Java and Go clients sign): the
// request's extFields carry AccessKey, Signature and optionally
// SecurityToken. The signed content is the values of all extFields but
// Signature, in ascending key order, then the body; the signature is
// base64(HMAC-SHA1(secretKey, content)). rocketmq-client-go signs without
// its SecurityToken; for requests in language GO both are tried.
//
// RocketMQ 5 gRPC, bolide.v1 gRPC and frame connections carry two values
// (metadata, or the frame protocol's Auth request):
//
//	x-mq-date-time: 20260101T120000Z
//	authorization:  MQv2-HMAC-SHA1 Credential=<AK>[/...], SignedHeaders=x-mq-date-time, Signature=<hex HMAC-SHA1(secretKey, date)>
//
// Hex in either case (Go clients send lower case, Java and Node upper).
// Because only the date is signed, two checks guard against a captured
// header: the date must be within MaxSkew of the server's clock (15
// minutes by default; expired), and a header first used by one connection
// is refused on any other more than ReplayGrace (5 s) later (replayed).
// Neither makes header credentials safe over plain text: turn TLS on.
//
// # Decisions
//
// Authorize(principal, peer, needs...) checks topic and group permissions;
// Admin checks administrative requests: an admin user when ACL is on, a
// loopback caller when it is off (unless AllowRemoteAdmin); Internal
// checks calls between daemons (an admin user when ACL is on). A nil
// *Guard allows everything. Refusals are audited at WARN (peer, access
// key, reason; never a secret or signature), rate-limited, and counted.
package auth
