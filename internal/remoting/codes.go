package remoting

// Request codes (RocketMQ's RequestCode).
const (
	SendMessage                      int32 = 10
	PullMessage                      int32 = 11
	QueryMessage                     int32 = 12
	QueryBrokerOffset                int32 = 13
	QueryConsumerOffset              int32 = 14
	UpdateConsumerOffset             int32 = 15
	UpdateAndCreateTopic             int32 = 17
	UpdateAndCreateTopicList         int32 = 18
	GetAllTopicConfig                int32 = 21
	GetTopicConfigList               int32 = 22
	GetTopicNameList                 int32 = 23
	UpdateBrokerConfig               int32 = 25
	GetBrokerConfig                  int32 = 26
	TriggerDeleteFiles               int32 = 27
	GetBrokerRuntimeInfo             int32 = 28
	SearchOffsetByTimestamp          int32 = 29
	GetMaxOffset                     int32 = 30
	GetMinOffset                     int32 = 31
	GetEarliestMsgStoreTime          int32 = 32
	ViewMessageByID                  int32 = 33
	HeartBeat                        int32 = 34
	UnregisterClient                 int32 = 35
	ConsumerSendMsgBack              int32 = 36
	EndTransaction                   int32 = 37
	GetConsumerListByGroup           int32 = 38
	CheckTransactionState            int32 = 39
	NotifyConsumerIDsChanged         int32 = 40
	LockBatchMQ                      int32 = 41
	UnlockBatchMQ                    int32 = 42
	GetAllConsumerOffset             int32 = 43
	GetAllDelayOffset                int32 = 45
	CheckClientConfig                int32 = 46
	GetClientConfig                  int32 = 47
	PutKVConfig                      int32 = 100
	GetKVConfig                      int32 = 101
	DeleteKVConfig                   int32 = 102
	RegisterBroker                   int32 = 103
	UnregisterBroker                 int32 = 104
	GetRouteInfoByTopic              int32 = 105
	GetBrokerClusterInfo             int32 = 106
	UpdateAndCreateSubscriptionGroup int32 = 200
	GetAllSubscriptionGroupConfig    int32 = 201
	GetTopicStatsInfo                int32 = 202
	GetConsumerConnectionList        int32 = 203
	GetProducerConnectionList        int32 = 204
	WipeWritePermOfBroker            int32 = 205
	GetAllTopicListFromNameServer    int32 = 206
	DeleteSubscriptionGroup          int32 = 207
	GetConsumeStats                  int32 = 208
	DeleteTopicInBroker              int32 = 215
	DeleteTopicInNameServer          int32 = 216
	RegisterTopicInNameServer        int32 = 217
	GetKVListByNamespace             int32 = 219
	ResetConsumerClientOffset        int32 = 220
	GetConsumerStatusFromClient      int32 = 221
	InvokeBrokerToResetOffset        int32 = 222
	InvokeBrokerToGetConsumerStatus  int32 = 223
	GetTopicsByCluster               int32 = 224
	QueryTopicConsumeByWho           int32 = 300
	QueryConsumeTimeSpan             int32 = 303
	GetSystemTopicListFromNS         int32 = 304
	GetSystemTopicListFromBroker     int32 = 305
	GetConsumerRunningInfo           int32 = 307
	ConsumeMessageDirectly           int32 = 309
	SendMessageV2                    int32 = 310
	GetBrokerConsumeStats            int32 = 317
	UpdateNamesrvConfig              int32 = 318
	GetNamesrvConfig                 int32 = 319
	SendBatchMessage                 int32 = 320
	QueryConsumeQueue                int32 = 321
	QueryDataVersion                 int32 = 322
	SendReplyMessage                 int32 = 324
	SendReplyMessageV2               int32 = 325
	PushReplyMessageToClient         int32 = 326
	AddWritePermOfBroker             int32 = 327
	GetAllProducerInfo               int32 = 328
	GetTopicConfig                   int32 = 351
	GetSubscriptionGroupConfig       int32 = 352
	LitePullMessage                  int32 = 361
	QueryAssignment                  int32 = 400
	SetMessageRequestMode            int32 = 401
	PopMessage                       int32 = 200050
	AckMessage                       int32 = 200051
	ChangeMessageInvisibleTime       int32 = 200053
)

// Response codes (RocketMQ's ResponseCode and RemotingSysResponseCode).
const (
	Success                    int32 = 0
	SystemError                int32 = 1
	SystemBusy                 int32 = 2
	RequestCodeNotSupported    int32 = 3
	TransactionFailed          int32 = 4
	FlushDiskTimeout           int32 = 10
	SlaveNotAvailable          int32 = 11
	FlushSlaveTimeout          int32 = 12
	MessageIllegal             int32 = 13
	ServiceNotAvailable        int32 = 14
	VersionNotSupported        int32 = 15
	NoPermission               int32 = 16
	TopicNotExist              int32 = 17
	TopicExistAlready          int32 = 18
	PullNotFound               int32 = 19
	PullRetryImmediately       int32 = 20
	PullOffsetMoved            int32 = 21
	QueryNotFound              int32 = 22
	SubscriptionParseFailed    int32 = 23
	SubscriptionNotExist       int32 = 24
	SubscriptionNotLatest      int32 = 25
	SubscriptionGroupNotExist  int32 = 26
	FilterDataNotExist         int32 = 27
	FilterDataNotLatest        int32 = 28
	InvalidParameter           int32 = 29
	TransactionShouldCommit    int32 = 200
	TransactionShouldRollback  int32 = 201
	TransactionStateUnknown    int32 = 202
	TransactionStateGroupWrong int32 = 203
	ConsumerNotOnline          int32 = 206
	ConsumeMsgTimeout          int32 = 207
	NoMessage                  int32 = 208
	PollingFull                int32 = 209
	PollingTimeout             int32 = 210
	BrokerNotExist             int32 = 211
	BroadcastConsumption       int32 = 213
	FlowControl                int32 = 215
	IllegalOperation           int32 = 604
)

// ServerVersion is the version this side writes in its headers: RocketMQ's
// MQVersion ordinal of 5.3.3, so clients that gate features on the broker's
// version see a current 5.x broker.
const ServerVersion int32 = 701

// Languages of the binary header (RocketMQ's LanguageCode).
var languages = [...]string{"JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP", "OMS", "RUST", "NODE_JS"}
