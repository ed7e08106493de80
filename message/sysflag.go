package message

// SysFlag bits of a stored record (RocketMQ's MessageSysFlag).
const (
	SysFlagCompressed       int32 = 0x1
	SysFlagMultiTags        int32 = 0x2
	SysFlagTransNotType     int32 = 0x0
	SysFlagTransPrepared    int32 = 0x4
	SysFlagTransCommit      int32 = 0x8
	SysFlagTransRollback    int32 = 0xC
	SysFlagBornHostV6       int32 = 0x10
	SysFlagStoreHostV6      int32 = 0x20
	SysFlagNeedUnwrap       int32 = 0x40
	SysFlagInnerBatch       int32 = 0x80
	sysFlagTransTypeMask    int32 = 0xC
	sysFlagCompressionShift       = 8
)

// TransactionType returns the transaction bits of a sysflag: one of
// SysFlagTransNotType, SysFlagTransPrepared, SysFlagTransCommit or
// SysFlagTransRollback.
func TransactionType(sysFlag int32) int32 { return sysFlag & sysFlagTransTypeMask }

// Dispatchable reports whether a record with this sysflag belongs in a
// ConsumeQueue: plain and committed messages do; prepared and rolled-back
// transactional records do not.
func Dispatchable(sysFlag int32) bool {
	t := TransactionType(sysFlag)
	return t == SysFlagTransNotType || t == SysFlagTransCommit
}
