package replication

import "context"

// ControllerClient is how the broker reaches the controllers (package
// broker/remote implements it over bolide.v1's Controller service). Errors
// are coded (errcode): CONTROLLER_NOT_LEADER from a follower,
// CONTROLLER_FENCED for a stale request.
type ControllerClient interface {
	// Heartbeat opens a beat stream to the controller at addr; the stream
	// ends when ctx is done.
	Heartbeat(ctx context.Context, addr string) (BeatStream, error)
	// AlterSyncStateSet asks the controller at addr to change the group's
	// sync state set and returns the group as committed.
	AlterSyncStateSet(ctx context.Context, addr string, req AlterSyncStateSetRequest) (GroupState, error)
	// ElectMaster asks the controller at addr to elect a master now.
	ElectMaster(ctx context.Context, addr string, req ElectMasterRequest) (GroupState, error)
	// Close releases the connections.
	Close() error
}

// BeatStream is one broker–controller heartbeat stream. Send and Recv may
// be called from two goroutines.
type BeatStream interface {
	Send(BrokerBeat) error
	Recv() (ControllerBeat, error)
}

// BrokerBeat is what a broker tells a controller every heartbeat.
type BrokerBeat struct {
	Cluster, BrokerName string
	ReplicaID           int64
	Addr, HAAddr        string
	// Epoch is the highest master epoch the broker knows; Role "MASTER"
	// only while it is the master of that epoch.
	Epoch         int64
	Role          string
	MaxOffset     int64
	ConfirmOffset int64
	Priority      int32
	Seq           uint64
}

// ReplicaState is one replica as the controller knows it.
type ReplicaState struct {
	ID           int64
	Addr, HAAddr string
	Alive        bool
	Epoch        int64
	MaxOffset    int64
	Role         string
}

// GroupState is a broker group as committed in the controller's log.
type GroupState struct {
	Cluster, BrokerName      string
	MasterID                 int64 // 0: none
	MasterAddr, MasterHAAddr string
	MasterEpoch              int64
	SyncStateSet             []int64
	SyncStateSetEpoch        int64
	Replicas                 []ReplicaState
}

// ControllerBeat is a controller's answer to a beat (Seq) or a push
// (Seq 0).
type ControllerBeat struct {
	// Err is the answer's status (CONTROLLER_NOT_LEADER on a follower).
	Err      error
	Seq      uint64
	Leader   bool
	LeaderID string
	Group    *GroupState
	// LeaseMs > 0: the master of Group.MasterEpoch may accept writes until
	// LeaseMs after it sent beat Seq.
	LeaseMs int64
}

// AlterSyncStateSetRequest is the master's proposal of a new sync state
// set, fenced by its epoch and the set's epoch.
type AlterSyncStateSetRequest struct {
	BrokerName        string
	MasterID          int64
	MasterEpoch       int64
	SyncStateSetEpoch int64
	NewSyncStateSet   []int64
}

// ElectMasterRequest asks for an election now: of Designated (> 0), or
// the best candidate.
type ElectMasterRequest struct {
	BrokerName string
	Designated int64
	Unclean    bool
}
