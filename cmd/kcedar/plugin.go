package main

// kubectlPlugin is set when the binary runs as the kubectl plugin.
var kubectlPlugin bool

// clusterPoliciesFlag names the flag that reads the cluster's policy
// objects: --cluster for kcedar.
var clusterPoliciesFlag = "cluster"
