package web

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/effectors/effectors/records"
)

// Role is what an [Identity] may see and do at the gateway.
type Role string

// Roles.
const (
	// RoleUser sees and acts on only what it owns: effectors it created,
	// records whose EA-Owner is its name, its orchestrations.
	RoleUser Role = "user"
	// RoleAdmin sees and acts on everything.
	RoleAdmin Role = "admin"
)

// AdminName is the identity of the shared token ([Config.Token]): an admin.
const AdminName = "admin"

// MaxToken bounds the length of a token a client presents, in bytes. A
// longer one is refused (4401) without being hashed.
const MaxToken = 1024

// TokenHashPrefix starts a token hash in a users file: "sha256:" and the
// SHA-256 of the token as 64 lower-case hex digits (see [HashToken]).
const TokenHashPrefix = "sha256:"

// maxUsersFile bounds the size of a users file.
const maxUsersFile = 1 << 20

// Identity is who a connection acts as: the gateway sets EA-Owner to Name
// on every record it sends, every effector it creates and every
// orchestration it starts, and shows a [RoleUser] only what carries its
// Name.
type Identity struct {
	// Name is the user (or tenant) id, an EA-Owner value. Empty only on a
	// gateway without authentication (loopback, no token, no users).
	Name string `json:"user,omitempty"`
	Role Role   `json:"role"`
}

// Admin reports whether the identity sees everything.
func (i Identity) Admin() bool { return i.Role == RoleAdmin }

// Users maps tokens to identities: the parsed users file of
// [Config.UsersFile]. Tokens are kept only as SHA-256 hashes. The zero
// value has no users. A *Users is immutable and safe for concurrent use.
type Users struct {
	byHash map[[sha256.Size]byte]Identity
}

// HashToken returns the line form of token's hash for a users file:
// "sha256:<hex>". The same as `printf %s "$TOKEN" | sha256sum`.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return TokenHashPrefix + hex.EncodeToString(sum[:])
}

// ParseUsers parses a users file: one user per line,
//
//	<name> <role> sha256:<hex of the SHA-256 of the token>
//
// with fields separated by spaces or tabs; empty lines and lines starting
// with '#' are skipped. name follows the EA-Owner rule (1-256 printable
// ASCII characters without spaces); role is "user" or "admin". A name may
// have several lines (several tokens, e.g. while rotating), all of the same
// role. A hash may appear once. Errors name the line and match [ErrInvalid].
func ParseUsers(data []byte) (*Users, error) {
	if len(data) > maxUsersFile {
		return nil, invalidf("users file: %d bytes, at most %d", len(data), maxUsersFile)
	}
	u := &Users{byHash: map[[sha256.Size]byte]Identity{}}
	roles := map[string]Role{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxUsersFile)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) != 3 {
			return nil, invalidf("users file line %d: %d fields, want 3: <name> <role> sha256:<hex> (the token itself never goes in the file; hash it with: printf %%s \"$TOKEN\" | sha256sum)", line, len(fields))
		}
		name, role, hash := fields[0], Role(fields[1]), fields[2]
		if err := records.ValidateOwner(name); err != nil {
			return nil, invalidf("users file line %d: name: %v", line, err)
		}
		if role != RoleUser && role != RoleAdmin {
			return nil, invalidf("users file line %d: role %q: want user or admin", line, truncate(string(role), 32))
		}
		if prev, ok := roles[name]; ok && prev != role {
			return nil, invalidf("users file line %d: %s is %s on an earlier line: one role per name", line, name, prev)
		}
		roles[name] = role
		hexSum, ok := strings.CutPrefix(hash, TokenHashPrefix)
		if !ok {
			return nil, invalidf("users file line %d: token hash must start with %q: write the SHA-256 of the token, never the token (printf %%s \"$TOKEN\" | sha256sum)", line, TokenHashPrefix)
		}
		var sum [sha256.Size]byte
		if n, err := hex.Decode(sum[:], []byte(hexSum)); err != nil || n != sha256.Size || len(hexSum) != 2*sha256.Size {
			return nil, invalidf("users file line %d: token hash: want %d hex digits after %q", line, 2*sha256.Size, TokenHashPrefix)
		}
		if _, dup := u.byHash[sum]; dup {
			return nil, invalidf("users file line %d: this token hash is on an earlier line: give every user its own token", line)
		}
		u.byHash[sum] = Identity{Name: name, Role: role}
	}
	if err := sc.Err(); err != nil {
		return nil, invalidf("users file line %d: %v", line+1, err)
	}
	return u, nil
}

// LoadUsers reads and parses the users file at path (see [ParseUsers]).
func LoadUsers(path string) (*Users, error) {
	data, err := readUsersFile(path)
	if err != nil {
		return nil, err
	}
	return ParseUsers(data)
}

func readUsersFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: users file: %w", ErrInvalid, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxUsersFile+1))
	if err != nil {
		return nil, fmt.Errorf("%w: users file %s: %w", ErrInvalid, path, err)
	}
	return data, nil
}

// Len returns the number of tokens.
func (u *Users) Len() int {
	if u == nil {
		return 0
	}
	return len(u.byHash)
}

// Lookup returns the identity of token, if the users know it.
func (u *Users) Lookup(token string) (Identity, bool) {
	if u == nil || len(token) > MaxToken {
		return Identity{}, false
	}
	id, ok := u.byHash[sha256.Sum256([]byte(token))]
	return id, ok
}

// lookupHash returns the identity of a token hash.
func (u *Users) lookupHash(sum [sha256.Size]byte) (Identity, bool) {
	if u == nil {
		return Identity{}, false
	}
	id, ok := u.byHash[sum]
	return id, ok
}

// credential is what a connection authenticated with.
type credential struct {
	id Identity
	// fromFile: the token is a users-file entry of hash sum (checked again
	// whenever the file changes); otherwise the shared token.
	fromFile bool
	sum      [sha256.Size]byte
}

// authenticate returns the credential of token: the shared token
// ([Config.Token], the identity admin) or an entry of the users file.
// reason says why not when ok is false.
func (g *Gateway) authenticate(token string) (c credential, reason string, ok bool) {
	if len(token) > MaxToken {
		return credential{}, fmt.Sprintf("unauthorized: token longer than %d bytes", MaxToken), false
	}
	if g.cfg.Token != "" && subtle.ConstantTimeCompare([]byte(token), []byte(g.cfg.Token)) == 1 {
		return credential{id: Identity{Name: AdminName, Role: RoleAdmin}}, "", true
	}
	sum := sha256.Sum256([]byte(token))
	if id, found := g.users.Load().lookupHash(sum); found {
		return credential{id: id, fromFile: true, sum: sum}, "", true
	}
	return credential{}, "unauthorized: wrong token", false
}
