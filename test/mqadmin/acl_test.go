package mqadmin

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/broker"
	"github.com/bolide-mq/bolide/internal/cluster"
)

// mqadminAs runs one mqadmin command signed with keys (empty: unsigned):
// the tool reads its credentials from $ROCKETMQ_HOME/conf/tools.yml
// (RocketMQ's AclUtils.getAclRPCHook). It returns the output and whether
// the command succeeded (exit status 0 and no exception printed).
func mqadminAs(t *testing.T, cp, ns string, keys auth.Credentials, args ...string) (string, bool) {
	t.Helper()
	home := t.TempDir()
	if !keys.Empty() {
		if err := os.MkdirAll(filepath.Join(home, "conf"), 0o700); err != nil {
			t.Fatal(err)
		}
		yml := "accessKey: " + keys.AccessKey + "\nsecretKey: " + keys.SecretKey + "\n"
		if err := os.WriteFile(filepath.Join(home, "conf", "tools.yml"), []byte(yml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	jargs := []string{"-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
		"-Duser.home=" + home, "-Drocketmq.home.dir=" + home, "-Drocketmq.client.logUseSlf4j=false",
		"-cp", cp, "org.apache.rocketmq.tools.command.MQAdminStartup"}
	jargs = append(append(jargs, args...), "-n", ns)
	cmd := exec.CommandContext(ctx, "java", jargs...)
	cmd.Dir = home
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("mqadmin as %q %s:\n%s", keys.AccessKey, strings.Join(args, " "), out.String())
	s := out.String()
	return s, err == nil && !strings.Contains(s, "Exception") && !strings.Contains(s, "command failed")
}

// TestMQAdminACL: RocketMQ's own admin tool against a broker with ACL on.
// It signs with the keys of its tools.yml: an admin creates a topic, a
// normal user and an unsigned tool are refused with NO_PERMISSION (16)
// and create nothing. Runtime configuration is an allow-list: the
// broker's and the NameServer's path keys (CVE-2023-33246,
// CVE-2023-37582) are refused even for the admin.
func TestMQAdminACL(t *testing.T) {
	cpFile := os.Getenv("BOLIDE_MQADMIN_CP")
	if cpFile == "" {
		t.Skip("BOLIDE_MQADMIN_CP is not set: run scripts/compat-mqadmin.sh, which resolves mqadmin's class path (rocketmq-tools 5.5.0) with Maven")
	}
	raw, err := os.ReadFile(cpFile)
	if err != nil {
		t.Fatalf("BOLIDE_MQADMIN_CP: %v", err)
	}
	cp := strings.TrimSpace(string(raw))
	adminKeys := auth.Credentials{AccessKey: "mqaAdmin", SecretKey: "mqaAdminSecret"}
	userKeys := auth.Credentials{AccessKey: "mqaUser1", SecretKey: "mqaUserSecret"}
	aclFile := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := auth.WriteFile(aclFile, &auth.File{Accounts: []auth.Account{
		{AccessKey: adminKeys.AccessKey, SecretKey: adminKeys.SecretKey, Admin: true},
		{AccessKey: userKeys.AccessKey, SecretKey: userKeys.SecretKey, DefaultTopicPerm: "PUB|SUB", DefaultGroupPerm: "SUB"},
	}}); err != nil {
		t.Fatal(err)
	}
	c := cluster.Start(t, cluster.Options{Broker: func(o *broker.Options) {
		o.Auth = auth.Config{Enabled: true, File: aclFile}
	}})
	addr := c.Broker(0).Addr()
	ns := c.NameServerAddrs()[0]
	exists := func(topic string) bool {
		for _, tc := range c.Broker(0).TopicConfigs() {
			if tc.Name == topic {
				return true
			}
		}
		return false
	}

	for _, who := range []auth.Credentials{{}, userKeys} {
		out, ok := mqadminAs(t, cp, ns, who, "updateTopic", "-b", addr, "-t", "MqaAclTopic", "-r", "2", "-w", "2")
		if ok || !strings.Contains(out, "CODE: 16") {
			t.Errorf("updateTopic as %q: not refused with code 16", who.AccessKey)
		}
		if exists("MqaAclTopic") {
			t.Fatalf("updateTopic as %q created the topic", who.AccessKey)
		}
	}
	out, ok := mqadminAs(t, cp, ns, adminKeys, "updateTopic", "-b", addr, "-t", "MqaAclTopic", "-r", "2", "-w", "2")
	if !ok || !regexp.MustCompile(`create topic to `+regexp.QuoteMeta(addr)+` success`).MatchString(out) || !exists("MqaAclTopic") {
		t.Fatalf("updateTopic as the admin failed")
	}
	// A read signed by a normal user is served.
	if out, ok := mqadminAs(t, cp, ns, userKeys, "brokerStatus", "-b", addr); !ok || !strings.Contains(out, "brokerActive") {
		t.Errorf("brokerStatus as a normal user failed")
	}

	// Configuration: the admin may not set a path on the broker, nor on
	// the NameServer (ACL off there: loopback is admin, the allow-list
	// still refuses).
	out, ok = mqadminAs(t, cp, ns, adminKeys, "updateBrokerConfig", "-b", addr, "-k", "brokerConfigPath", "-v", "/tmp/evil.properties")
	if ok || !strings.Contains(out, "CODE: 16") || !strings.Contains(out, "brokerConfigPath may not be changed at runtime") {
		t.Errorf("updateBrokerConfig of a path: not refused with the allow-list's reason")
	}
	out, ok = mqadminAs(t, cp, ns, auth.Credentials{}, "updateNamesrvConfig", "-k", "kvConfigPath", "-v", "/tmp/evil.json")
	if ok || !strings.Contains(out, "kvConfigPath may not be changed at runtime") {
		t.Errorf("updateNamesrvConfig of kvConfigPath: not refused with the allow-list's reason")
	}
	if out, ok := mqadminAs(t, cp, ns, auth.Credentials{}, "getNamesrvConfig"); !ok || !strings.Contains(out, "aclEnable") {
		t.Errorf("getNamesrvConfig failed")
	}
}
