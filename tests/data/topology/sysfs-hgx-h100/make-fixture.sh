#!/usr/bin/env bash
# Writes this fixture (README.md): the sysfs files an 8-GPU HGX H100 node with eight ConnectX-7
# InfiniBand HCAs shows, after the kernel's documented layout (Documentation/ABI/stable/
# sysfs-class-infiniband, sysfs-bus-pci). Run it from this folder; it rewrites bus/, class/ and
# devices/.
set -euo pipefail
cd "$(dirname "$0")"
rm -rf bus class devices
mkdir -p bus/pci/devices class/infiniband
put() { mkdir -p "$(dirname "$1")"; printf '%s\n' "$2" > "$1"; }
# A PCI function under devices/: its numa_node, vendor, device and class, and its
# bus/pci/devices link.
pci() {
  local path=$1 numa=$2 vendor=$3 device=$4 class=$5
  put "devices/$path/numa_node" "$numa"
  put "devices/$path/vendor" "$vendor"
  put "devices/$path/device" "$device"
  put "devices/$path/class" "$class"
  ln -s "../../../devices/$path" "bus/pci/devices/$(basename "$path")"
}
for i in 0 1 2 3 4 5 6 7; do
  gpu=$((0x18 + 16 * i)); root=$((gpu - 3)); up=$((gpu - 2)); down=$((gpu - 1)); nic=$((gpu + 1))
  numa=$((i < 4 ? 0 : 1))
  rc=$(printf 'pci0000:%02x' $root)
  rp=$(printf '0000:%02x:01.0' $root)
  usp=$(printf '0000:%02x:00.0' $up)
  dsp_gpu=$(printf '0000:%02x:00.0' $down)
  dsp_nic=$(printf '0000:%02x:01.0' $down)
  # The root port, the PCIe switch's upstream port and its two downstream ports.
  pci "$rc/$rp" $numa 0x8086 0x352a 0x060400
  pci "$rc/$rp/$usp" $numa 0x1000 0xc030 0x060400
  pci "$rc/$rp/$usp/$dsp_gpu" $numa 0x1000 0xc030 0x060400
  pci "$rc/$rp/$usp/$dsp_nic" $numa 0x1000 0xc030 0x060400
  # The GPU (H100 SXM5 80GB) and the HCA (ConnectX-7) below the same switch.
  pci "$rc/$rp/$usp/$dsp_gpu/$(printf '0000:%02x:00.0' $gpu)" $numa 0x10de 0x2330 0x030200
  nicpath="$rc/$rp/$usp/$dsp_nic/$(printf '0000:%02x:00.0' $nic)"
  pci "$nicpath" $numa 0x15b3 0x1021 0x020700
  dev="mlx5_$i"
  # mlx5_0 is gpu-005's HCA-1 in ../two-pod.ibnetdiscover; the others are cabled to rails that
  # dump does not describe.
  if [[ $i == 0 ]]; then node=0002:c903:00a1:000e; port=0002:c903:00a1:000f
  else node=$(printf '0002:c903:00a1:0e%02x' $i); port=$(printf '0002:c903:00a1:0f%02x' $i); fi
  ib="devices/$nicpath/infiniband/$dev"
  put "$ib/node_guid" "$node"
  put "$ib/sys_image_guid" "$node"
  put "$ib/node_type" "1: CA"
  put "$ib/node_desc" "gpu-005 $dev"
  put "$ib/fw_ver" "28.39.1002"
  put "$ib/hca_type" "MT4129"
  put "$ib/board_id" "MT_0000000838"
  ln -s "../../../$(basename "$nicpath")" "$ib/device"
  p="$ib/ports/1"
  put "$p/state" "4: ACTIVE"
  put "$p/phys_state" "5: LinkUp"
  put "$p/rate" "400 Gb/sec (4X NDR)"
  put "$p/lid" "$(printf '0x%x' $((16 + i)))"
  put "$p/sm_lid" "0x1"
  put "$p/lid_mask_count" "0"
  put "$p/link_layer" "InfiniBand"
  put "$p/gids/0" "fe80:0000:0000:0000:$port"
  for c in port_rcv_data port_xmit_data symbol_error link_downed port_rcv_errors; do
    put "$p/counters/$c" "0"
  done
  ln -s "../../$ib" "class/infiniband/$dev"
done
