package argmask

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestSecretName(t *testing.T) {
	for name, want := range map[string]bool{
		"password": true, "PASSWORD": true, "pwd": true, "PWD": true, "pass": true, "passwd": true, "db_pass": true,
		"secret_key": true, "secretKey": true, "client_secret": true, "clientSecret": true, "CLIENT-SECRET": true,
		"apiKey": true, "api_key": true, "X-Api-Key": true, "APIKey": true, "apikey": true, "GITHUB_TOKEN": true,
		"accessToken": true, "_authToken": true, "Authorization": true, "Cookie": true, "MYSQL_PWD": true,
		"AWS_SECRET_ACCESS_KEY": true, "private_key": true, "Private-Token": true, "spring.datasource.password": true,
		"credentials": true, "pw": true, "passphrase": true, "auth": true, "basic_auth": true,
		"path": false, "command": false, "max_tokens": false, "token_count": false, "password_file": false,
		"no-password": false, "bypass": false, "compass": false, "monkey": false, "key": false, "keywords": false,
		"token-file": false, "cwd": false, "AWS_ACCESS_KEY_ID": false, "passenger": false,
	} {
		if got := SecretName(name); got != want {
			t.Errorf("SecretName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestMaskValueMasksSecretsOnCommandLines(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`mysql --password=hunter2 -e 'select 1'`, `mysql --password=[MASKED] -e 'select 1'`},
		{`mysql -u root -phunter2 db`, `mysql -u root -p[MASKED] db`},
		{`mysql -u root -p hunter2`, `mysql -u root -p [MASKED]`},
		{`mysql -uroot -p'hunter 2' db`, `mysql -uroot -p[MASKED] db`},
		{`psql --password "hunter 2" -h db`, `psql --password [MASKED] -h db`},
		{`PASSWORD=hunter2 ./deploy.sh`, `PASSWORD=[MASKED] ./deploy.sh`},
		{`export API_TOKEN="hunter 2"; make`, `export API_TOKEN=[MASKED]; make`},
		{`env DB_PWD=hunter2 app --token hunter3`, `env DB_PWD=[MASKED] app --token [MASKED]`},
		{`git clone https://alice:hunter2@git.example.com/x.git`, `git clone https://alice:[MASKED]@git.example.com/x.git`},
		{`curl -u alice:hunter2 https://x`, `curl -u [MASKED] https://x`},
		{`curl -H 'Authorization: Bearer hunter2' https://x`, `curl -H 'Authorization: [MASKED]' https://x`},
		{`curl -d '{"user":"a","password":"hunter2"}' https://x`, `curl -d '{"user":"a","password":"[MASKED]"}' https://x`},
		{`sh -c 'mysql -phunter2 db'`, `sh -c 'mysql -p[MASKED] db'`},
		{`bash -c "redis-cli -a \"hunter 2\" ping"`, `bash -c 'redis-cli -a [MASKED] ping'`},
		{`echo hi # --password=hunter2`, `echo hi # --password=[MASKED]`},
		{`mysql -phunter2 'unterminated`, `mysql -p[MASKED] 'unterminated`},
		{`curl 'https://x/api?access_token=hunter2&page=2'`, `curl 'https://x/api?access_token=[MASKED]&page=2'`},
		{`cd $PWD && PWD=/tmp ls`, `cd $PWD && PWD=/tmp ls`},
		{`go test ./... && git diff --stat HEAD~1`, `go test ./... && git diff --stat HEAD~1`},
		{`mkdir -p build/out`, `mkdir -p build/out`},
		{`npm publish --//registry.npmjs.org/:_authToken=hunter2`, `npm publish --//registry.npmjs.org/:_authToken=[MASKED]`},
	} {
		if got := maskValue(c.in); got != c.want {
			t.Errorf("maskValue(%s)\n got %s\nwant %s", c.in, got, c.want)
		}
	}
}

func TestMaskMasksKeysAndArgv(t *testing.T) {
	m, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	got := mask(t, m, `{"pwd":"hunter2","client_secret":"hunter3","secret_key":"hunter4","pass":"hunter5",`+
		`"argv":["mysql","-p","hunter6"],"url":"postgres://app:hunter7@db:5432/x","max_tokens":100}`)
	for _, s := range []string{"hunter2", "hunter3", "hunter4", "hunter5", "hunter6", "hunter7"} {
		if strings.Contains(got.JSON, s) {
			t.Errorf("%s is in the log: %s", s, got.JSON)
		}
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(got.JSON), &v); err != nil {
		t.Fatal(err)
	}
	// The detectors may name what they found in place of the marker.
	if url, _ := v["url"].(string); v["max_tokens"] != float64(100) || !strings.HasPrefix(url, "postgres://app:[") || !strings.HasSuffix(url, "]@db:5432/x") {
		t.Errorf("log = %s", got.JSON)
	}
	want := "/argv/2 /client_secret /pass /pwd /secret_key /url"
	if strings.Join(got.Masked, " ") != want {
		t.Errorf("masked = %q, want %s", got.Masked, want)
	}
}
