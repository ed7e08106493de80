// Package console is the operations console of a daemon: the browser app
// (static assets embedded in the binary) and the JSON API it calls, served
// on the daemon's admin listener next to /metrics, /healthz, /readyz and
// /debug/pprof. Both daemons serve it: the NameServer's console shows the
// whole cluster; a broker's shows the cluster of its --namesrv list, or only
// itself when it has none.
//
// The backend is a thin adapter over the Go SDK: every endpoint is one or a
// few client.Admin calls (a producer for a replay, as
// client.Admin.ReplayDeadLetters does), never a direct look into a broker,
// so that every console action is also an SDK call and a CLI command. The
// SDK clients are made on the first API request, one per user (LRU, a few
// entries), and closed by Console.Close: an idle daemon whose console is
// never opened pays nothing but the handler.
//
// # Routes
//
//	GET /                      302 to /console/
//	GET /console/              index.html of the app
//	GET /console/<asset>       the app's files: Cache-Control: no-cache, an
//	                           ETag (If-None-Match answers 304), gzip when
//	                           the request accepts it (Content-Encoding:
//	                           gzip, Vary: Accept-Encoding)
//	    /console/api/...       the JSON API below
//
// # Wire format of the API
//
// Every answer is Content-Type: application/json (UTF-8), except the NDJSON
// ones said below. Names are lowerCamelCase. Conventions:
//
//   - Times are RFC 3339 in UTC with milliseconds, "2026-12-02T07:01:02.345Z",
//     or "" when unknown (never null, never 0001-01-01).
//   - Durations are Go duration strings: "1s", "1m30s", "2h0m0s"; "" when
//     unknown.
//   - Sizes are bytes, offsets and counts are numbers (int64 fits in a
//     JavaScript number below 2^53; offsets and byte counts do).
//   - perm is RocketMQ's permission number: 2 write, 4 read, 6 read+write
//     (1 inherit is shown as is).
//   - A message body is base64 in "body"; "bodyText" is the same body as a
//     string when it is valid UTF-8, else absent.
//   - Lists are [] when empty, never null; an object that is unknown or
//     could not be fetched is null, and "error" (a string, "" when none)
//     says why where the shape has one.
//
// # Errors
//
// A failed request answers 4xx/5xx with
//
//	{"error":{"code":"TOPIC_NOT_EXIST","message":"topic orders2 does not exist"}}
//
// code is the errcode name (proto bolide.v1 Code) of the cause: what the CLI
// prints. Status by code:
//
//	400 INVALID_PARAMETER, ILLEGAL_TOPIC, ILLEGAL_GROUP, MESSAGE_ILLEGAL, ... (bad input; nothing changed)
//	401 UNAUTHENTICATED (ACL on, no or bad HTTP Basic credentials; with WWW-Authenticate: Basic)
//	403 NO_PERMISSION: the user may not do this, a mutation came without the
//	    X-Bolide-Console: 1 header or without a JSON Content-Type, or (ACL off) a
//	    mutation came from a non-loopback address (see Access control)
//	404 TOPIC_NOT_EXIST, SUBSCRIPTION_GROUP_NOT_EXIST, QUERY_NOT_FOUND (no such message),
//	    BROKER_NOT_EXIST, TRANSACTION_NOT_FOUND; REQUEST_NOT_SUPPORTED for an unknown API path
//	405 REQUEST_NOT_SUPPORTED for a method the path does not take (with an Allow header)
//	409 TOPIC_EXIST_ALREADY, TRANSACTION_STATE_CONFLICT, DELAY_ALREADY_DELIVERED
//	502 an error of the cluster the console cannot place (SYSTEM_ERROR, ...)
//	503 SERVICE_NOT_AVAILABLE, SYSTEM_BUSY, NOT_MASTER, no route or no NameServer reachable
//	504 TIMEOUT (the cluster did not answer in time)
//
// # Access control and CSRF
//
// With ACL on, every /console path (pages and API) needs HTTP Basic
// credentials: the access key and secret key of any user of the ACL file.
// The console calls the cluster with those keys (client.WithCredentials), so
// a user can do and read exactly what the CLI lets them. /whoami names the
// user. A mutation (POST, PUT, DELETE) needs the header X-Bolide-Console: 1
// and Content-Type: application/json (a CSRF guard a cross-site form cannot
// meet); without them it answers 403 NO_PERMISSION and does nothing.
//
// With ACL off the console applies Bolide's rule for administrative requests
// (auth.Guard.Admin) to its browser, since its own calls come from the
// daemon's host and would pass it: a mutation is accepted only from a
// loopback peer (the request's RemoteAddr), unless Options.AllowRemoteAdmin
// (the daemon's --allow-remote-admin); otherwise 403 NO_PERMISSION naming
// the address and --allow-remote-admin, and nothing is done. Reads are open.
//
// # Endpoints (all under /console/api)
//
// GET /whoami
//
//	{"daemon":"nameserver",              // or "broker"
//	 "name":"127.0.0.1:9876",            // the broker's name, or the NameServer's address
//	 "addr":"127.0.0.1:9876",            // the daemon's client listen address
//	 "version":"v0.20.0",
//	 "acl":false,
//	 "user":"",                          // the access key with ACL on, else ""
//	 "nameservers":["127.0.0.1:9876"]}   // [] for a broker without --namesrv
//
// GET /cluster
//
//	{"nameservers":["127.0.0.1:9876"],
//	 "clusters":{"DefaultCluster":["broker-a"]},
//	 "brokers":[{"cluster":"DefaultCluster","brokerName":"broker-a","brokerId":0,
//	   "addr":"127.0.0.1:10911","adminAddr":"127.0.0.1:10913","version":"v0.20.0",
//	   "role":"MASTER",                  // MASTER, SLAVE, FENCED ("" when the broker did not answer)
//	   "epoch":1,
//	   "lastUpdate":"2026-12-02T07:01:02.345Z",   // its last registration with the NameServer
//	   "alive":true,                     // it answered now
//	   "writable":true,                  // brokerPermission has the write bit (true when unknown)
//	   "runtime":{BrokerRuntime}|null,
//	   "replication":{"mode":"async","lagBytes":0,"inSyncSlaves":1,
//	     "slaves":[{"brokerId":1,"lagBytes":0,"inSync":true}]}|null,
//	   "error":""}],                     // why runtime/replication are missing, else ""
//	 "controller":{"leader":"n1","leaderRaftAddr":"127.0.0.1:9878","term":3,"commitIndex":42,
//	   "peers":[{"id":"n1","raftAddr":"127.0.0.1:9878","state":"leader"}],
//	   "groups":[{"cluster":"DefaultCluster","brokerName":"broker-a","masterId":1,
//	     "masterAddr":"127.0.0.1:10911","masterEpoch":2,"syncStateSet":[1,2],"syncStateSetEpoch":3}]}|null}
//	                                     // null: the NameServers run no controller
//
// The brokers are every member the NameServer knows, sorted by name then id.
// For a slave replication carries its own lag (mode, lagBytes) and slaves [].
//
// BrokerRuntime (the figures of client.Admin.BrokerRuntime; the rates are
// per second over the last minute):
//
//	{"startTime":"2026-12-02T07:01:02.345Z","putMessagesTotal":120,"getMessagesTotal":118,
//	 "putBytesTotal":61440,"getBytesTotal":60416,"putTps":2.0,"getTps":1.96,
//	 "commitLogMinOffset":0,"commitLogMaxOffset":123456,"dispatchBehindBytes":0,
//	 "storeBytes":1073741824,"diskUsedRatio":0.42,"diskTotalBytes":500107862016,"diskFreeBytes":290062548992,
//	 "topics":12,"queues":96,"groups":3,"consumerConnections":2,"producerConnections":1,
//	 "heapBytes":25165824,"rssBytes":67108864,"goroutines":143,"brokerPermission":6,
//	 "extra":{"flushDiskType":"ASYNC_FLUSH"}}
//
// GET /topics[?all=1]
//
// One TopicStats call (one RPC per master) for every topic: no call per
// topic. Without all=1 only normal topics; with it retry, DLQ and system
// topics too, those only the brokers' stores hold included
// (SCHEDULE_TOPIC_XXXX once a delayed message was sent, the transaction and
// POP topics): perm 0, messageType "", queue counts covering their queue ids.
//
//	{"topics":[{"topic":"orders",
//	  "kind":"normal",                   // normal, retry (%RETRY%...), dlq (%DLQ%...), system
//	  "messageType":"NORMAL",            // NORMAL, FIFO, DELAY, TRANSACTION, MIXED
//	  "perm":6,                          // the lowest over its brokers
//	  "readQueues":8,"writeQueues":8,    // sums over its brokers
//	  "messages":1500,                   // sum of max − min offsets
//	  "maxOffsetSum":1500,               // the app computes rates from its change between polls
//	  "lastStoreTime":"2026-12-02T07:01:02.345Z",
//	  "brokers":[{"broker":"broker-a","readQueues":8,"writeQueues":8,"perm":6,
//	    "maxOffsetSum":1500,"minOffsetSum":0,"lastStoreTime":"2026-12-02T07:01:02.345Z"}]}],
//	 "error":""}                         // brokers that did not answer (their topics are missing)
//
// POST /topics (create; client.Admin.CreateTopic)
//
//	request:  {"topic":"orders","queues":8,"perm":6,"messageType":"NORMAL","order":false,
//	           "cluster":"","brokers":[]}         // all but "topic" optional: 8 queues, perm 6,
//	                                             // no type (MIXED), every master
//	201:      {"topic":"orders","queues":8,"perm":6,"messageType":"NORMAL","order":false,
//	           "cluster":"","brokers":[]}
//	409 TOPIC_EXIST_ALREADY when it exists.
//
// PUT /topics/{topic} (update; client.Admin.UpdateTopic): the request as
// for POST without "topic" (the path names it) → 200 and the same answer;
// 404 TOPIC_NOT_EXIST for an unknown topic.
//
// GET /topics/{topic}
//
//	{"topic":"orders",
//	 "configs":[{"broker":"broker-a","readQueues":8,"writeQueues":8,"perm":6,"order":false,
//	   "messageType":"NORMAL","attributes":{"message.type":"NORMAL"}}],
//	 "route":{"brokers":[{"broker":"broker-a","cluster":"DefaultCluster",
//	     "addrs":{"0":"127.0.0.1:10911","1":"127.0.0.1:10921"}}],    // by broker id
//	   "queues":[{"broker":"broker-a","readQueues":8,"writeQueues":8,"perm":6}]},
//	 "queues":[{"broker":"broker-a","queueId":0,"minOffset":0,"maxOffset":190,
//	   "lastStoreTime":"2026-12-02T07:01:02.345Z"}]}
//
// 404 TOPIC_NOT_EXIST for an unknown topic.
//
// GET /groups
//
// The union of the consumer groups online (client.Admin.ConsumerGroups) and
// the declared subscription groups (client.Admin.SubscriptionGroups); the
// lag of each (client.Admin.ConsumeStats) with bounded parallelism.
//
//	{"groups":[{"group":"billing",
//	  "model":"CLUSTERING",              // or BROADCASTING; "" when no member is online
//	  "orderly":false,
//	  "clients":2,                       // members online
//	  "subscriptions":{"orders":"*"},    // topic → tag expression of the members online
//	  "brokers":["broker-a"],            // broker groups that know it online
//	  "totalLag":42,                     // null when it could not be computed (see "error")
//	  "declared":{"fifo":false,"maxDeliveryAttempts":17,"retryPolicy":"CUSTOMIZED",
//	    "retryBackoff":["10s","30s"],"exponential":null,"consumeEnable":true}|null,   // null: not declared
//	  "error":""}],                      // why totalLag is null
//	 "error":""}                         // the declarations could not be listed
//
// GET /groups/{group}
//
//	{"group":"billing","totalLag":42,
//	 "queues":[{"topic":"orders","broker":"broker-a","queueId":0,"brokerOffset":190,
//	   "consumerOffset":180,              // -1 when the group committed none
//	   "lag":10,"lastStoreTime":"2026-12-02T07:01:02.345Z"}],
//	 "online":{"model":"CLUSTERING","orderly":false,"subscriptions":{"orders":"*"},
//	   "clientIds":["10.0.0.1@123"],"brokers":["broker-a"]}|null,    // null: no member online
//	 "connections":{"producers":[conn],"consumers":[conn]}|null,    // null: unknown (see "error");
//	                                     // brokers that did not answer are named in "error"
//	 "declared":[{"broker":"broker-a","fifo":false,"maxDeliveryAttempts":17,
//	   "retryPolicy":"CUSTOMIZED","retryBackoff":["10s","30s"],
//	   "exponential":{"initial":"1s","max":"1m0s","multiplier":2}|null,
//	   "consumeEnable":true,"attributes":{}}]|null,                 // null: not declared
//	 "error":""}
//
//	conn: {"clientId":"10.0.0.1@123","remoteAddr":"10.0.0.1:53412","language":"GO",
//	  "version":"v0.20.0","protocol":"bolide",        // bolide, remoting or grpc-v5
//	  "connectedSince":"2026-12-02T07:01:02.345Z",
//	  "lastHeartbeat":"2026-12-02T07:05:02.345Z","consumeType":"PUSH","messageModel":"CLUSTERING",
//	  "subscriptions":{"orders":"*"},"broker":"broker-a"}   // producers: consumeType, messageModel ""
//
// 404 SUBSCRIPTION_GROUP_NOT_EXIST when no broker knows the group (no
// member online, no declaration, no offset).
//
// POST /groups/{group}/reset (client.Admin.ResetOffset)
//
//	request: {"topic":"orders",
//	          "to":"2026-12-02T07:00:00Z",   // an RFC 3339 time, a duration ago ("1h", "30m"),
//	                                         // "earliest" or "latest"
//	          "dryRun":true,
//	          "force":false}                 // a real reset of a group with members online
//	                                         // needs force (else 400 INVALID_PARAMETER: they
//	                                         // would commit their own positions again)
//	200:     {"dryRun":true,"changes":[{"topic":"orders","broker":"broker-a","queueId":0,
//	          "before":180,"after":120}]}
//
// PUT /groups/{group} (declare or change a subscription group:
// client.Admin.CreateSubscriptionGroup, or UpdateSubscriptionGroup when it
// exists)
//
//	request: {"fifo":false,"maxDeliveryAttempts":17,"retryBackoff":["1s","10s"],
//	          "consumeEnable":true,"cluster":"","brokers":[]}      // all optional
//	          // consumeEnable false stops the group: the brokers refuse its pulls
//	          // and receives (NO_PERMISSION), its offsets stay; true starts it again
//	          // where it stopped; absent keeps what is declared (new: enabled)
//	200:     {"group":"billing","created":true,"declared":[as in GET /groups/{group}]}
//
// GET /messages?topic=T&key=K[&max=N]          by key (client.Admin.QueryMessageByKey)
// GET /messages?id=ID[&topic=T]                by id: unique id or offset id (client.Admin.ViewMessage)
// GET /messages?topic=T&begin=TIME&end=TIME[&max=N]   by store time (client.Admin.MessagesByTime);
// TIME is RFC 3339 or a duration ago ("1h"); end defaults to now. max
// defaults to 64, at most 1000.
//
//	{"messages":[summary],"capped":false}   // capped: more matched than max
//
//	summary: {"msgId":"0A0000017B...","offsetMsgId":"7F00000100002A9F0000000000000C2E",
//	  "topic":"orders","tags":"paid","keys":["order-42"],"broker":"broker-a","queueId":3,
//	  "queueOffset":17,"storeTime":"2026-12-02T07:01:02.345Z","bornTime":"2026-12-02T07:01:02.340Z",
//	  "bodySize":5,"reconsumeTimes":0}
//
// GET /messages/{id}[?topic=T]
//
//	{"message":{summary + "bornHost":"10.0.0.1:53412","storeHost":"127.0.0.1:10911",
//	   "properties":{"UNIQ_KEY":"0A00...","KEYS":"order-42","TAGS":"paid"},
//	   "body":"aGVsbG8=","bodyText":"hello"},
//	 "trace":[{"kind":"origin","topic":"orders","group":"","broker":"broker-a","queueId":3,
//	   "queueOffset":17,"storeTime":"2026-12-02T07:01:02.345Z","reconsumeTimes":0,"msgId":"7F00..."},
//	  {"kind":"retry","topic":"%RETRY%billing","group":"billing",...},
//	  {"kind":"dlq","topic":"%DLQ%billing","group":"billing",...}]}
//
// trace is ordered by store time; msgId of a hop is the offset id of that
// stored copy. 404 QUERY_NOT_FOUND for an unknown id.
//
// GET /dlq
//
//	{"groups":[{"group":"billing","messages":3,"topic":"%DLQ%billing"}],   // every %DLQ% topic
//	 "error":""}                         // brokers that did not answer
//
// GET /dlq/{group}[?max=N&topic=T]    (client.Admin.DeadLetters; topic
// keeps the dead letters of one original topic; max defaults to 200)
//
//	{"deadLetters":[{summary (topic is %DLQ%<group>) +
//	   "originTopic":"orders","originMsgId":"7F00...",   // offset id of the first stored copy
//	   "firstFailure":"2026-12-02T07:01:02.345Z","lastFailure":"2026-12-02T07:03:02.345Z",
//	   "failureReason":"",               // the consumer's last reason, "" when none given
//	   "replayed":false,
//	   "replay":{"at":"...","topic":"orders","msgId":"...","offsetMsgId":"..."}|null}]}
//
// GET /dlq/{group}/export → 200 Content-Type: application/x-ndjson,
// Content-Disposition: attachment; filename="dlq-<group>.ndjson": one dead
// letter a line, as in /dlq/{group} plus "properties", "body" and
// "bodyText". Every dead letter of the group (no max).
//
// POST /dlq/{group}/replay (client.Admin.ReplayDeadLetters)
//
//	request: {"ids":["..."],              // msgId, offsetMsgId or originMsgId; null or absent: all
//	          "toTopic":"",               // "" sends each back to its origin topic
//	          "dryRun":false}
//	200 Content-Type: application/x-ndjson, one JSON object a line, flushed as it goes:
//	  {"done":1,"total":3,"replayed":1,"failed":0,"skipped":0,"msgId":"...","outcome":"replayed","error":""}
//	  ...                                 // outcome: replayed, skipped (replayed before), failed
//	  {"summary":{"selected":3,"replayed":2,"skipped":1,"failed":0,"notFound":[],"dryRun":false},"final":true}
//
// An error after the stream began ends it with
// {"error":{"code":"...","message":"..."},"final":true}; an error before
// answers 4xx/5xx as any request. A dry run lists what would be replayed
// (outcome replayed) and changes nothing.
//
// GET /delay (client.Admin.DelayStatus of each master)
//
//	{"brokers":[{"broker":"broker-a","addr":"127.0.0.1:10911",
//	  "pending":4,                       // delay levels + timer
//	  "nextDue":"2026-12-02T07:01:12.345Z",
//	  "levels":[{"level":3,"delay":"10s","pending":1,"nextDue":"2026-12-02T07:01:12.345Z"}],  // levels with pending > 0
//	  "timer":{"enabled":true,"maxDelay":"72h0m0s","pending":3,"nextDue":"...",
//	    "delivered":10,"cancelled":1,"lost":0}|null,     // null when the broker did not answer
//	  "error":""}]}
//
// POST /delay/cancel (client.Admin.CancelDelayed: a message sent for
// delivery at a time)
//
//	request: {"topic":"orders","msgId":"0A0000017B..."}   // the unique id the send returned
//	200:     {"cancelled":true}
//	409 DELAY_ALREADY_DELIVERED when it was delivered already.
//
// GET /transactions[?broker=B&group=G&topic=T&max=N]
//
//	{"stats":[{"broker":"broker-a","addr":"127.0.0.1:10911","pending":1,"oldestPendingAge":"12s",
//	   "halfMessages":5,"checks":3,"commits":3,"rollbacks":1,"discards":0,"discardedTotal":0}],
//	 "pending":[{"broker":"broker-a","topic":"orders","queueId":0,"group":"txn-producers",
//	   "transactionId":"...","commitLogOffset":98765,"halfOffset":4,"checks":1,
//	   "born":"2026-12-02T07:01:02.345Z","nextCheck":"2026-12-02T07:02:02.345Z"}],
//	 "discarded":[{"broker":"broker-a","offset":0,"topic":"orders","queueId":0,"group":"txn-producers",
//	   "transactionId":"...","msgId":"...","checks":15,"born":"...","discardedAt":"..."}],
//	 "error":""}
//
// POST /transactions/resolve (client.Admin.ResolveTransaction)
//
//	request: {"broker":"broker-a","commitLogOffset":98765,"commit":true}   // as GET listed it
//	200:     {"resolved":true}
//	404 TRANSACTION_NOT_FOUND when it is no longer pending; 409 TRANSACTION_STATE_CONFLICT.
//
// GET /brokers/{name}/config[?addr=A]    (client.Admin.BrokerConfig of the
// group's master, or of the member at A)
//
//	{"addr":"127.0.0.1:10911",
//	 "entries":[{"key":"maxMessageSize","value":"4194304","default":"4194304","runtime":true,
//	   "description":"largest message body accepted, bytes"}]}
//
// PUT /brokers/{name}/config (client.Admin.UpdateBrokerConfig on every
// member of the group, or on ?addr=A only)
//
//	request: {"maxMessageSize":"8388608"}          // key → value, all or nothing
//	200:     {"addrs":["127.0.0.1:10911"],"entries":[changed entries]}
//	400 INVALID_PARAMETER naming a key that is not live-changeable.
//
// POST /brokers/{name}/write-perm (client.Admin.SetBrokerWritable)
//
//	request: {"writable":false}
//	200:     {"brokers":["127.0.0.1:10911","127.0.0.1:10921"],"writable":false}
package console
