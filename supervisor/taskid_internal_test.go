package supervisor

import (
	"regexp"
	"strings"
	"testing"
)

// A task id is the same every time the same change is applied, and with
// the runtime's key it cannot be computed without it: it differs from the
// unkeyed id (which a client knowing the orchestration and its input could
// compute) and between keys, with the same shape.
func TestTaskRecordIDSigned(t *testing.T) {
	t.Parallel()
	r := &orchRecord{ID: "o1", Steps: 3}
	w := wait{key: "task-1", step: "b", req: request{Kind: "task", To: "task-b/demo", Type: "task", Payload: []byte{0x81}}}
	key := []byte(strings.Repeat("k", 32))
	plain, signed := taskRecordID(nil, r, w), taskRecordID(key, r, w)
	shape := regexp.MustCompile(`^o1\.3\.[0-9a-f]{20}$`)
	if !shape.MatchString(plain) || !shape.MatchString(signed) || taskSteps(signed) != 3 {
		t.Errorf("ids %s, %s: want o1.3.<20 hex digits>, steps 3", plain, signed)
	}
	if signed == plain || signed == taskRecordID([]byte(strings.Repeat("x", 32)), r, w) {
		t.Errorf("signed id %s does not depend on the key", signed)
	}
	if again := taskRecordID(key, r, w); again != signed {
		t.Errorf("task id not stable: %s then %s", signed, again)
	}
}

func TestCancelRecordIDSigned(t *testing.T) {
	t.Parallel()
	key := []byte(strings.Repeat("k", 32))
	plain, signed := cancelRecordID(nil, "o1", 4, "task-a/demo"), cancelRecordID(key, "o1", 4, "task-a/demo")
	if plain != "o1.4.cancel.task-a/demo" || !regexp.MustCompile(`^o1\.4\.cancel\.task-a/demo\.[0-9a-f]{20}$`).MatchString(signed) {
		t.Errorf("cancel ids %s, %s", plain, signed)
	}
	if signed == cancelRecordID([]byte(strings.Repeat("x", 32)), "o1", 4, "task-a/demo") || signed != cancelRecordID(key, "o1", 4, "task-a/demo") {
		t.Errorf("signed cancel id %s: not stable, or does not depend on the key", signed)
	}
}
