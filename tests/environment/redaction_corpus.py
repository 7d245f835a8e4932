"""Two corpora for the Redactor: code that must come out byte-identical, secrets that must not.

``CLEAN`` is text shaped like what coding sessions hold (our own writing, in
several languages): identifiers and calls that contain token/key/secret/password/auth,
type annotations, URLs and paths, base64-looking hashes, UUIDs, commit ids,
lock files, prose about passwords. Redaction must not change one byte of it,
even when every sample goes through one :class:`Redactor` (one long turn).

``SECRETS`` pairs a text with the secret values it holds: provider key formats,
private keys, connection strings with passwords, ``password = "..."`` assignments
with literal values, JSON web tokens, ``.env`` lines. Every value must be gone
after redaction.

The tests in ``test_redaction_corpus.py`` and ``bench/redaction.py`` read both.
"""

# ruff: noqa: E501 - the samples keep the long lines of real lock files and code

from __future__ import annotations

# Secrets are assembled from parts so that no scanner of this repository mistakes
# the corpus for a leak; the values are random and were never valid anywhere.
_GH = "ghp_" + "R8xkQ2mZ7vL0pW4nT6yB1cD9fH3jK5sA" + "e2Gu"
_GL = "glpat-" + "Xr7Qm2Lp9Vz4Kt8Nw3Yb"
_AWS_ID = "AKIA" + "QX7ZK2M4N8P3R6T1"
_AWS_SECRET = "Tq9Lm2Xv7Rk4Pz8Wn1Yb6Hs3Jd5Gf0Ac" + "E/Ur+Ki2"
_GOOGLE = "AIza" + "SyD7x9Kq2Lm4Np6Rt8Vw0Yz1Bc3Df5Gh7Jk"
_SLACK = "xoxb-" + "2741938475-5829104736-Qm8Lx2Zr7Vk4Pn9Wt3Yb6Hs"
_STRIPE = "sk_live_" + "51Hq8Xm2Lz7Vr4Kp9Wn3Yt6Bs"
_OPENAI = "sk-proj-" + "Xq7Lm2Zr9Vk4Pn8Wt3Yb6Hs1Jd5Gf0Ac2Ue7Ri"
_ANTHROPIC = "sk-ant-api03-" + "Q7xLm2Zr9Vk4Pn8Wt3Yb6Hs1Jd5Gf0Ac2Ue7Ri-Ab3Cd"
_HF = "hf_" + "QxLmZrVkPnWtYbHsJdGfAcUeRiAbCdEfGh"
_NPM = "npm_" + "Q7xLm2Zr9Vk4Pn8Wt3Yb6Hs1Jd5Gf0Ac2Ue7R"
_PYPI = "pypi-AgEIcHlwaS5vcmc" + "CJDQ3ZTk1NWQzLTg1YjctNGE5Yy05ZmIxLTA0ZTk3MjM0ZmE2MQACKlsz"
_JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    + ".eyJzdWIiOiI0MiIsIm5hbWUiOiJhbGljZSIsImlhdCI6MTcwMDAwMDAwMH0"
    + ".Xk2bq7Lm9Zr4Vp8Wn3Yt6Hs1Jd5Gf0Ac2Ue7RiQmTo"
)
_AGE = "AGE-SECRET-KEY-1" + "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7LQPZRY9X8GF2TVDW0S3JN54KHCE"
_SHOPIFY = "shpat_" + "3f786850e387550fdab836ed7e6dc881"
_SENDGRID = "SG." + "Xq7Lm2Zr9Vk4Pn8Wt3Yb6H" + "." + "s1Jd5Gf0Ac2Ue7RiQmToXk2bq7Lm9Zr4Vp8Wn3Yt6Hs"
_DO = "dop_v1_" + "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
_DATABRICKS = "dapi" + "3f786850e387550fdab836ed7e6dc881"
_DOPPLER = "dp.pt." + "Xq7Lm2Zr9Vk4Pn8Wt3Yb6Hs1Jd5Gf0Ac2Ue7RiQmTo"
_LINEAR = "lin_api_" + "Xq7Lm2Zr9Vk4Pn8Wt3Yb6Hs1Jd5Gf0Ac2Ue7RiQm"
_POSTMAN = "PMAK-" + "3f786850e387550fdab836ed" + "-" + "7dc881de23001b3f786850e387550fdab8"
_GRAFANA = "glsa_" + "Xq7Lm2Zr9Vk4Pn8Wt3Yb6Hs1Jd5Gf0Ac2" + "_" + "3f786850"
_SQUARE = "sq0atp-" + "Xq7Lm2Zr9Vk4Pn8Wt3Yb6Hs"
_MAILGUN = "key-" + "3f786850e387550fdab836ed7e6dc8Xq"
_KEY_BODY = (
    "MIIEowIBAAKCAQEAx7Lm2Zr9Vk4Pn8Wt3Yb6Hs1Jd5Gf0Ac2Ue7RiQmToXk2bq7Lm9Z\n"
    "r4Vp8Wn3Yt6Hs1Jd5Gf0Ac2Ue7RiQmToQ7xLm2Zr9Vk4Pn8Wt3Yb6Hs1Jd5Gf0Ac2\n"
)
_PRIVATE_KEY = "-----BEGIN RSA PRIVATE KEY-----\n" + _KEY_BODY + "-----END RSA PRIVATE KEY-----"

#: name -> text that must come out of redaction byte-identical.
CLEAN: dict[str, str] = {
    "js-csrf": """\
const csrfToken = document.querySelector('meta[name="csrf-token"]').content;
async function post(url, body) {
  const res = await fetch(url, {
    method: "POST",
    headers: { "X-CSRF-Token": csrfToken, "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`csrfToken rejected: ${res.status}`);
  return res.json();
}
let token = await getToken();
const apiKey = process.env.OPENAI_API_KEY;
const { accessToken, refreshToken } = await auth.refresh(token);
localStorage.setItem("token", accessToken);
const secret = config.secret || crypto.randomBytes(32).toString("hex");
""",
    "python-pydantic": """\
from pydantic import BaseModel, Field, SecretStr


class Settings(BaseModel):
    password: SecretStr = Field(..., description="the database password")
    api_key: str | None = Field(default=None, alias="apiKey")
    token_url: str = Field(default="https://auth.example.com/oauth/token")
    secret_name: str = Field(default="prod-db-credentials")
    password_file: Path = Field(default=Path("/run/secrets/db_password"))
    max_tokens: int = Field(default=4096, ge=1)
    name: str = Field(default="ollm")


def login(user: str, password: str) -> Session:
    api_key = anthropic_api_key()
    token = Base.url_encode64(user.encode())
    secret_key = settings.SECRET_KEY
    password_hash = bcrypt.hashpw(password.encode(), bcrypt.gensalt())
    auth_token = request.headers.get("Authorization")
    if password == confirm_password:
        return Session(token=token, secret=secret_key)
    raise AuthError("password mismatch")
""",
    "ruby": """\
class TokensController < ApplicationController
  def create
    token = Base64.urlsafe_encode64(SecureRandom.random_bytes(32))
    password = params[:password]
    api_key = ENV.fetch("API_KEY")
    @token = Token.create!(user: current_user, value: token)
    secret = Rails.application.credentials.secret_key_base
    render json: { token: @token.value, expires_in: 3600 }
  end
end
""",
    "go": """\
func NewClient(cfg Config) (*Client, error) {
\ttoken := os.Getenv("GITHUB_TOKEN")
\tapiKey := cfg.APIKey
\tsecret, err := secrets.Load(ctx, cfg.SecretName)
\tif err != nil {
\t\treturn nil, fmt.Errorf("load secret %s: %w", cfg.SecretName, err)
\t}
\tpassword := strings.TrimSpace(string(secret))
\treturn &Client{token: token, apiKey: apiKey, password: password}, nil
}
""",
    "rust": """\
let token: String = env::var("HF_TOKEN")?;
let password: &str = args.password.as_deref().unwrap_or_default();
let api_key = Token::new(&config.api_key)?;
let secret_key = SecretKey::from_slice(&bytes)?;
match token.parse::<u64>() { Ok(n) => n, Err(_) => 0 };
""",
    "java": """\
String password = System.getenv("DB_PASSWORD");
String apiKey = properties.getProperty("api.key");
private final TokenService tokenService;
this.secretKey = Keys.hmacShaKeyFor(secret.getBytes(StandardCharsets.UTF_8));
if (token.equals(expectedToken)) { authenticate(user); }
""",
    "php": """\
$password = $_POST['password'];
$token = bin2hex(random_bytes(16));
$apiKey = getenv('API_KEY');
$config = ['password' => $password, 'token' => $token, 'secret' => env('APP_SECRET')];
""",
    "shell": """\
export GITHUB_TOKEN=$(gh auth token)
export API_KEY="${API_KEY:-}"
TOKEN=$(cat ~/.config/tool/token)
curl -H "Authorization: Bearer $TOKEN" https://api.example.com/v1/me
docker login -u alice --password-stdin < ~/.docker/password.txt
mysql -u root -p shop
mysql -u root -p"$MYSQL_ROOT_PASSWORD" shop < dump.sql
sshpass -p ${SSH_PASS} ssh deploy@host
password=$1
""",
    "yaml-ci": """\
jobs:
  deploy:
    env:
      NPM_TOKEN: ${{ secrets.NPM_TOKEN }}
      API_KEY: ${{ secrets.API_KEY }}
    steps:
      - uses: actions/checkout@v4
      - run: npm publish
        env:
          NODE_AUTH_TOKEN: ${{ secrets.NPM_TOKEN }}
secretName: db-credentials
tokenSecretRef:
  name: cloudflare-api-token
  key: api-token
password: !vault |
""",
    "k8s": """\
apiVersion: v1
kind: Pod
spec:
  containers:
    - name: app
      env:
        - name: DB_PASSWORD
          valueFrom:
            secretKeyRef:
              name: db-credentials
              key: password
  volumes:
    - name: tls
      secret:
        secretName: app-tls
""",
    "urls-and-paths": """\
See https://github.com/Mai0313/VibeCodingTracker/issues/new and
https://github.com/encode/httpx/blob/master/httpx/_auth.py#L120 for the token flow.
Clone git@github.com:octo-org/secret-handshake.git into /home/alice/src/secret-handshake.
The file src/components/PasswordResetForm/PasswordResetForm.test.tsx fails.
Docs: https://docs.python.org/3/library/secrets.html#secrets.token_urlsafe
Proxy: http://proxy.internal.example:3128/ and tcp://127.0.0.1:2375
f"postgres://{user}:{password}@{host}:{port}/{database}"
"redis://:%s@%s:%d/0" % (password, host, port)
""",
    "hashes-and-ids": """\
commit 3f786850e387550fdab836ed7e6dc881de23001b
Merge: 9fceb02 d8329fa
request-id 123e4567-e89b-12d3-a456-426614174000
sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
integrity sha512-Vq9n0OTC1L9ypNwHt4W0bOx1k6kE3EeT0o7R1m3h0r7pHc6xDyQm2bD7b2RkqYp3h0LkWq5a8pQm1Vv3n4Hk2w==
etag "W/\\"5f3c9d0a-1b2c3d4e5f\\""
SGVsbG8gV29ybGQhIFRoaXMgaXMgYSB0ZXN0Lg==
docker image ollm@sha256:4b825dc642cb6eb9a060e54bf8d69288fbee4904
""",
    "lock-files": """\
[[package]]
name = "tokenizers"
version = "0.15.2"
files = [
    {file = "tokenizers-0.15.2-cp311-cp311-manylinux_2_17_x86_64.whl", hash = "sha256:1f2e3d4c5b6a7980"},
]
[[package]]
name = "secretstorage"
version = "3.3.3"
"js-tokens": "^4.0.0",
"node_modules/js-tokens": {
  "version": "4.0.0",
  "resolved": "https://registry.npmjs.org/js-tokens/-/js-tokens-4.0.0.tgz",
  "integrity": "sha512-RdJUflcE3cUzKiMqQgsCu06FPu9UdIJO0beYbPhHN4k6apgJtifcoCtT9bcxOpYBtpD2kCM6Sbzg4CausW/PKQ=="
},
github.com/golang-jwt/jwt/v5 v5.2.1 h1:OuVbFODueb089Lh128TAcimifWaLhJwVflnrgM17wHk=
keyring==24.3.0
""",
    "env-example": """\
# .env.example
DATABASE_URL=postgres://app:${DB_PASSWORD}@localhost:5432/app
API_KEY=your-api-key-here
SECRET_KEY=changeme
STRIPE_SECRET_KEY=<your stripe key>
TOKEN_TTL=3600
PASSWORD_MIN_LENGTH=12
OPENAI_API_KEY=
""",
    "prose": """\
The password is required to log in; your token is invalid, please log in again.
A token of thanks: the secret garden, the key of the monkey on the keyboard.
Set the api key in the settings page, then rotate the secret every 90 days.
The token is stored in localStorage and the password is hashed with bcrypt.
Use `tokenizer.encode()` to count tokens; the password field is optional.
""",
    "i18n": """\
{
  "password": "Password",
  "forgot_password": "Forgot your password?",
  "token_expired": "Your session token has expired.",
  "api_key_label": "API key",
  "secret": "Secret",
  "token_type": "bearer",
  "grant_type": "client_credentials",
  "response_type": "id_token"
}
""",
    "config-references": """\
[auth]
token_file = /etc/app/token
secret_path = ~/.config/app/secret.json
password_env = DB_PASSWORD
private_key = ./certs/server.key
api_key_id = 42
credentials = default
token_endpoint = https://login.example.com/oauth2/v2.0/token
""",
    "tool-output": """\
$ pytest tests/test_auth.py -q
tests/test_auth.py::test_token_refresh PASSED
tests/test_auth.py::test_password_reset_token_expires FAILED
E   AssertionError: assert token == expected_token
E    +  where token = Token(value=<hidden>, expires=datetime(2026, 1, 1))
1 failed, 1 passed in 0.42s
""",
    "typescript": """\
export interface AuthConfig {
  apiKey: string;
  token?: string | null;
  secret: SecretProvider;
}
export const authConfig: AuthConfig = {
  apiKey: import.meta.env.VITE_API_KEY,
  token: undefined,
  secret: new EnvSecretProvider("APP_SECRET"),
};
function isToken(value: unknown): value is Token { return typeof value === "string"; }
""",
    "csharp": """\
var token = await _tokenService.CreateTokenAsync(user, cancellationToken);
string password = configuration["Database:Password"];
services.AddAuthentication().AddJwtBearer(options => options.TokenValidationParameters = parameters);
""",
    "python-tests": """\
import secrets

import pytest

from app.auth import TokenStore, hash_password, verify_password


@pytest.fixture
def token_store(tmp_path):
    return TokenStore(tmp_path / "tokens.db")


def test_password_roundtrip():
    password = secrets.token_urlsafe(16)
    hashed = hash_password(password)
    assert verify_password(password, hashed)
    assert not verify_password(password + "x", hashed)


def test_tokens_expire(token_store, clock):
    token = token_store.issue(user_id=7, ttl=60)
    clock.advance(61)
    assert token_store.lookup(token) is None
    api_key = token_store.issue_api_key(user_id=7)
    assert api_key.startswith(token_store.prefix)
""",
    "dockerfile-makefile": """\
FROM python:3.12-slim AS build
ARG PIP_INDEX_URL
RUN --mount=type=secret,id=pip_token,env=PIP_TOKEN pip install -r requirements.txt
ENV TOKENIZERS_PARALLELISM=false
COPY --chown=app:app . /app

secrets:
\tgpg --decrypt secrets.env.gpg > .env
token-refresh:
\t./scripts/refresh_token.sh --output $(TOKEN_FILE)
""",
    "markdown": """\
## Authentication

Create a personal access token under *Settings → Developer settings* and export it
as `GITHUB_TOKEN`. The CLI reads `~/.config/ollm/credentials.toml`, where
`api_key = "..."` holds the key. Never commit the secret: add `.env` to `.gitignore`.

| Variable | Meaning |
| --- | --- |
| `API_KEY` | the key of the provider |
| `TOKEN_TTL` | seconds before a token expires |
""",
    "js-statements": """\
let count = 0; token = next_token; secret = refreshed_secret_2;
if (ready && token) { api_key = keyring_entry; }
""",
    "python-variables": """\
def rotate(store, user):
    token = next_token
    secret = new_secret_v2
    password = generate_password(length=20)
    api_key = store.api_key_for(user)
    return token, secret, password, api_key
""",
    "sql": """\
CREATE TABLE users (id uuid PRIMARY KEY, password_hash text NOT NULL, api_key_prefix text);
UPDATE users SET password_hash = crypt($1, gen_salt('bf')) WHERE id = $2;
SELECT token, expires_at FROM sessions WHERE token = :token;
""",
}

#: (name, text, secret values that must be gone after redaction).
SECRETS: list[tuple[str, str, tuple[str, ...]]] = [
    ("github", f"git remote set-url origin https://x:{_GH}@github.com/o/r\nuse {_GH}", (_GH,)),
    ("gitlab", f"GITLAB_TOKEN={_GL}", (_GL,)),
    ("aws-pair", f"aws_access_key_id = {_AWS_ID}\naws_secret_access_key = {_AWS_SECRET}",
     (_AWS_ID, _AWS_SECRET)),
    ("aws-bare", f"the keys are {_AWS_ID} and {_AWS_SECRET} (old)", (_AWS_ID, _AWS_SECRET)),
    ("google", f'const firebase = {{ apiKey: "{_GOOGLE}" }};', (_GOOGLE,)),
    ("slack", f"SLACK_BOT={_SLACK}", (_SLACK,)),
    ("stripe", f"Stripe.api_key = '{_STRIPE}'", (_STRIPE,)),
    ("openai", f"client = OpenAI(api_key=\"{_OPENAI}\")", (_OPENAI,)),
    ("anthropic", f"export ANTHROPIC_API_KEY={_ANTHROPIC}", (_ANTHROPIC,)),
    ("huggingface", f"huggingface-cli login --token {_HF}", (_HF,)),
    ("npm", f"//registry.npmjs.org/:_authToken={_NPM}", (_NPM,)),
    ("pypi", f"[pypi]\n  username = __token__\n  password = {_PYPI}", (_PYPI,)),
    ("jwt", f"curl -H 'Authorization: Bearer {_JWT}' https://api.example.com", (_JWT,)),
    ("jwt-cookie", f"Cookie: session={_JWT}; theme=dark", (_JWT,)),
    ("private-key", f"key = '''{_PRIVATE_KEY}'''", (_KEY_BODY.splitlines()[0],)),
    ("postgres-url", "DATABASE_URL=postgres://app:Wq8-zR2m!Lp@db.internal:5432/app", ("Wq8-zR2m!Lp",)),
    ("mongodb-url", 'uri = "mongodb+srv://admin:T7kq2LmZ9v@cluster0.x1y2z.mongodb.net/db"',
     ("T7kq2LmZ9v",)),
    ("redis-url", "REDIS_URL=redis://:hunter2Zebra9@cache:6379/0", ("hunter2Zebra9",)),
    ("azure-conn", "AccountName=acme;AccountKey=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZg==;",
     ("Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZg==",)),
    ("python-literal", 'DB_PASSWORD = "Sup3r-S3cret!"', ("Sup3r-S3cret!",)),
    ("python-annotated", 'password: str = "c0rrect-h0rse"', ("c0rrect-h0rse",)),
    ("python-kwarg", 'connect(host="db", password="Tr0ub4dor&3x")', ("Tr0ub4dor&3x",)),
    ("js-literal", "const apiKey = 'a9F3kQ7xL2mZ8vR4';", ("a9F3kQ7xL2mZ8vR4",)),
    ("json", '{"client_secret": "8fK2xQ9mL4vZ7rT1pW3n", "client_id": "app"}',
     ("8fK2xQ9mL4vZ7rT1pW3n",)),
    ("yaml", "database:\n  password: 'pa55-W0rd-2024'\n  user: app", ("pa55-W0rd-2024",)),
    ("dotenv", "SECRET_KEY=9d8f7a6s5d4f3g2h1j0k\nDEBUG=false", ("9d8f7a6s5d4f3g2h1j0k",)),
    ("go-literal", 'token := "Zx8Qm2Lp7Vr4Kt9N"', ("Zx8Qm2Lp7Vr4Kt9N",)),
    ("ruby-hash", "{ password: 'Hunter2-Zebra' }", ("Hunter2-Zebra",)),
    ("php-array", "'password' => 'P@ssw0rd-2024',", ("P@ssw0rd-2024",)),
    ("ini", "[db]\npassword = Pa55word-99\n", ("Pa55word-99",)),
    ("spoken", "my password is Hunter2-Zebra, please keep it", ("Hunter2-Zebra",)),
    ("spoken-echo", "postgres://u:Zq7-pass-91@db then I typed Zq7-pass-91 again", ("Zq7-pass-91",)),
    ("basic-auth", "Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l", ("YWxhZGRpbjpvcGVuc2VzYW1l",)),
    ("mysql-cli", "mysql -u root -pS3cretPw9 shop", ("S3cretPw9",)),
    ("slack-webhook", "https://hooks.slack.com/services/T00000000/B00000000/Xq7Lm2Zr9Vk4Pn8Wt3Yb",
     ("Xq7Lm2Zr9Vk4Pn8Wt3Yb",)),
    ("docker-compose", "environment:\n  - POSTGRES_PASSWORD=r7Kq2-Lm9Z\n", ("r7Kq2-Lm9Z",)),
    ("terraform", 'resource "x" "y" {\n  password = "Tf-Pa55-2024"\n}', ("Tf-Pa55-2024",)),
    ("csharp", 'var apiKey = "k8Xq2Lm9Zr7Vt4Pn";', ("k8Xq2Lm9Zr7Vt4Pn",)),
    ("age", f"# created: 2026-01-01\n{_AGE}", (_AGE,)),
    ("shopify", f"X-Shopify-Access-Token: {_SHOPIFY}", (_SHOPIFY,)),
    ("sendgrid", f"sg = SendGridAPIClient({_SENDGRID!r})", (_SENDGRID,)),
    ("digitalocean", f"doctl auth init -t {_DO}", (_DO,)),
    ("databricks", f"host = https://x.cloud.databricks.com\ntoken {_DATABRICKS}", (_DATABRICKS,)),
    ("doppler", f"DOPPLER={_DOPPLER}", (_DOPPLER,)),
    ("linear", f"linear.configure({_LINEAR!r})", (_LINEAR,)),
    ("postman", f"x-api-key: {_POSTMAN}", (_POSTMAN,)),
    ("grafana", f"grafana sa token: {_GRAFANA}", (_GRAFANA,)),
    ("square", f"SQUARE={_SQUARE}", (_SQUARE,)),
    ("mailgun", f"MG={_MAILGUN}", (_MAILGUN,)),
    ("url-query", "GET https://api.example.com/v1/items?limit=10&token=abc123 200", ("abc123",)),
    ("ado-conn", "Server=db;Database=shop;User Id=app;Password=myPassw0rd1;", ("myPassw0rd1",)),
    ("spoken-weak", "the wifi password is hunter2, the admin one too", ("hunter2",)),
    ("dotenv-weak", "DB_USER=app\nDB_PASSWORD=hunter2\nDB_HOST=db", ("hunter2",)),
    ("yaml-weak", "postgres:\n  user: app\n  password: password1  # dev only\n", ("password1",)),
    ("ini-weak", "[client]\nuser = root\npassword = admin123\n", ("admin123",)),
    ("compose-weak", "    environment:\n      - MYSQL_ROOT_PASSWORD=db_root_2\n", ("db_root_2",)),
]  # fmt: skip
