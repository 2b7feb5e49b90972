// Command with-cluster starts a throwaway etcd + kube-apiserver exactly like
// the e2e tests do (framework.StartCluster), runs a command against it, and
// stops everything again:
//
//	go run ./test/e2e/framework/cmd/with-cluster [flags] [--] [COMMAND [ARGS...]]
//
// The command runs with KUBECONFIG (admin, system:masters), KUBE_E2E_DIR,
// KUBE_E2E_SERVER, KUBE_E2E_CA and KUBE_E2E_ADMIN_TOKEN in its environment, and
// with-cluster exits with its exit status. Without a command it prints those
// variables as `export` lines and waits for SIGINT/SIGTERM. The etcd and
// kube-apiserver binaries are found like the tests find them ($ETCD_BIN,
// $KUBE_APISERVER_BIN, else the hack/kube-binaries.sh cache); run
// hack/kube-binaries.sh first on a fresh machine.
//
// Flags:
//
//	-authorization-config FILE  AuthorizationConfiguration (default: RBAC)
//	-token 'TOKEN,USER,UID,"G1,G2"'  extra static token user (repeatable)
//	-apiserver-flag FLAG        extra kube-apiserver flag (repeatable)
//	-keep                       keep the run directory
package main

import (
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/kcedar/kcedar/test/e2e/framework"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	os.Exit(run())
}

func run() int {
	var tokens, flags listFlag
	authz := flag.String("authorization-config", "", "AuthorizationConfiguration `file` (default: --authorization-mode=RBAC)")
	keep := flag.Bool("keep", false, "keep the run directory")
	flag.Var(&tokens, "token", "extra static token user, a token-file line: `TOKEN,USER,UID,\"G1,G2\"` (repeatable)")
	flag.Var(&flags, "apiserver-flag", "extra kube-apiserver `flag` (repeatable)")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: with-cluster [flags] [--] [COMMAND [ARGS...]]\n")
		flag.PrintDefaults()
	}
	flag.Parse()

	opts := framework.Options{ExtraFlags: flags}
	if *authz != "" {
		b, err := os.ReadFile(*authz)
		if err != nil {
			return fail(err)
		}
		opts.AuthorizationConfig = string(b)
	}
	for _, line := range tokens {
		rec, err := csv.NewReader(strings.NewReader(line)).Read()
		if err != nil || len(rec) < 2 {
			return fail(fmt.Errorf("-token %q: want TOKEN,USER[,UID[,\"G1,G2\"]]", line))
		}
		tk := framework.Token{Token: rec[0], User: rec[1]}
		if len(rec) > 2 {
			tk.UID = rec[2]
		}
		if len(rec) > 3 && rec[3] != "" {
			tk.Groups = strings.Split(rec[3], ",")
		}
		opts.Tokens = append(opts.Tokens, tk)
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	began := time.Now()
	c, stop, err := framework.StartCluster(opts)
	if err != nil {
		return fail(err)
	}
	defer func() {
		if *keep {
			c.Stop()
			fmt.Fprintf(os.Stderr, "with-cluster: stopped; run dir kept: %s\n", c.Dir)
			return
		}
		stop()
	}()
	fmt.Fprintf(os.Stderr, "with-cluster: kube-apiserver ready in %v at %s (run dir %s)\n",
		time.Since(began).Round(time.Millisecond), c.Server, c.Dir)
	env := []string{
		"KUBECONFIG=" + c.Kubeconfig,
		"KUBE_E2E_DIR=" + c.Dir,
		"KUBE_E2E_SERVER=" + c.Server,
		"KUBE_E2E_CA=" + c.CAFile,
		"KUBE_E2E_ADMIN_TOKEN=" + c.AdminToken,
	}

	if flag.NArg() == 0 {
		for _, e := range env {
			fmt.Printf("export %s\n", e)
		}
		fmt.Fprintln(os.Stderr, "with-cluster: running until SIGINT/SIGTERM")
		<-sigs
		return 0
	}

	cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case s := <-sigs:
			cmd.Process.Signal(s) // and wait for it to exit
		case err := <-done:
			var ee *exec.ExitError
			switch {
			case err == nil:
				return 0
			case errors.As(err, &ee) && ee.ExitCode() > 0:
				return ee.ExitCode()
			default:
				fmt.Fprintf(os.Stderr, "with-cluster: %s: %v\n", flag.Arg(0), err)
				return 1
			}
		}
	}
}

func fail(err error) int {
	fmt.Fprintf(os.Stderr, "with-cluster: %v\n", err)
	return 1
}
