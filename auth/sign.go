package auth

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Remoting extField keys of an ACL 1.0 signed request.
const (
	FieldAccessKey     = "AccessKey"
	FieldSignature     = "Signature"
	FieldSecurityToken = "SecurityToken"
)

// RemotingContent is what a remoting request's signature covers: the
// values of ext in ascending key order, without the keys named in skip,
// then the body.
func RemotingContent(ext map[string]string, body []byte, skip ...string) []byte {
	keys := make([]string, 0, len(ext))
	n := len(body)
	for k, v := range ext {
		if k == FieldSignature || contains(skip, k) {
			continue
		}
		keys = append(keys, k)
		n += len(v)
	}
	sort.Strings(keys)
	out := make([]byte, 0, n)
	for _, k := range keys {
		out = append(out, ext[k]...)
	}
	return append(out, body...)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// SignRemoting is the ACL 1.0 signature of a remoting request whose
// extFields (AccessKey included, Signature ignored) are ext:
// base64(HMAC-SHA1(secret, RemotingContent)).
func SignRemoting(ext map[string]string, body []byte, secret string) string {
	return base64.StdEncoding.EncodeToString(mac([]byte(secret), RemotingContent(ext, body)))
}

func mac(key, data []byte) []byte {
	h := hmac.New(sha1.New, key)
	h.Write(data)
	return h.Sum(nil)
}

// The signed-header scheme of RocketMQ 5's gRPC protocol, which bolide.v1's
// gRPC calls and frame connections use too.
const (
	// HeaderAuthorization is the metadata key of the credential.
	HeaderAuthorization = "authorization"
	// HeaderDate is the metadata key of the signed date.
	HeaderDate = "x-mq-date-time"
	// Scheme opens the authorization value.
	Scheme = "MQv2-HMAC-SHA1"
	// DateLayout is the date's format (UTC, a literal Z).
	DateLayout = "20060102T150405Z"
)

// SignDate is the hex HMAC-SHA1 of date under secret: the Signature of the
// authorization header.
func SignDate(date, secret string) string {
	return hex.EncodeToString(mac([]byte(secret), []byte(date)))
}

// NewHeader returns the authorization and date values for a call at now,
// signed with c.
func NewHeader(c Credentials, now time.Time) (authorization, date string) {
	date = now.UTC().Format(DateLayout)
	return Scheme + " Credential=" + c.AccessKey + ", SignedHeaders=" + HeaderDate + ", Signature=" + SignDate(date, c.SecretKey), date
}

// Authorization is a parsed authorization value.
type Authorization struct {
	// AccessKey is Credential up to its first '/' (the Go v5 client adds
	// "//Rocketmq").
	AccessKey string
	// Signature is the decoded hex signature.
	Signature []byte
}

// ParseAuthorization reads "MQv2-HMAC-SHA1 Credential=<AK>[/...],
// SignedHeaders=x-mq-date-time, Signature=<hex>", hex in either case,
// parts in any order.
func ParseAuthorization(v string) (Authorization, error) {
	scheme, rest, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || scheme != Scheme {
		return Authorization{}, fmt.Errorf("authorization: want scheme %s", Scheme)
	}
	var a Authorization
	var haveCred, haveSig bool
	for _, part := range strings.Split(rest, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return Authorization{}, fmt.Errorf("authorization: part %q is not key=value", truncate(part))
		}
		switch k {
		case "Credential":
			ak, _, _ := strings.Cut(val, "/")
			a.AccessKey, haveCred = ak, true
		case "Signature":
			sig, err := hex.DecodeString(val)
			if err != nil || len(sig) != sha1.Size {
				return Authorization{}, errors.New("authorization: Signature is not a hex HMAC-SHA1")
			}
			a.Signature, haveSig = sig, true
		case "SignedHeaders":
		default:
			return Authorization{}, fmt.Errorf("authorization: unknown part %q", truncate(k))
		}
	}
	if !haveCred || a.AccessKey == "" {
		return Authorization{}, errors.New("authorization: no access key in Credential")
	}
	if !haveSig {
		return Authorization{}, errors.New("authorization: no Signature")
	}
	return a, nil
}

func truncate(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}

// ParseDate reads a date in DateLayout.
func ParseDate(s string) (time.Time, error) {
	t, err := time.Parse(DateLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s %q: want %s", HeaderDate, truncate(s), DateLayout)
	}
	return t, nil
}

// Credentials are an access key and its secret.
type Credentials struct {
	AccessKey string
	SecretKey string
}

// Empty reports whether either key is missing (then nothing is signed).
func (c Credentials) Empty() bool { return c.AccessKey == "" || c.SecretKey == "" }
